// Verification of drafted tokens: the rejection-sampling step keeps the output
// distribution exactly p (statistical tests at fixed seeds), the greedy rule,
// and the n-gram lookup.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sampling/gumbel_sampler.h"
#include "speculative/adaptive_k.h"
#include "speculative/draft_stop.h"
#include "speculative/lookup_first_drafter.h"
#include "speculative/ngram_drafter.h"
#include "speculative/verifier.h"
#include "support/stats.h"

using namespace tandem;

namespace {

// A distribution with the given probabilities (zero stays exactly zero).
SamplingDistribution dist_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -INFINITY);
  SamplingParams sp;
  sp.temperature = 1.0f;
  SamplingDistribution d;
  d.compute(logits.data(), static_cast<int>(logits.size()), sp);
  return d;
}

// Emit one token the speculative way: draw t from q (or take the fixed token),
// then accept it or take the residual draw. Returns the emitted token.
int emit(const SamplingDistribution& p, const SamplingDistribution* q, int fixed, Rng& rng) {
  int t = q ? q->sample(rng) : fixed;
  int correction = -1;
  return accept_or_resample(p, q, t, rng, &correction) ? t : correction;
}

void expect_matches_p(const char* label, const std::vector<double>& p_probs,
                      const std::vector<double>* q_probs, int fixed = -1) {
  auto p = dist_of(p_probs);
  SamplingDistribution q;
  if (q_probs) q = dist_of(*q_probs);
  Rng rng(2024);
  const int trials = 200000;
  std::vector<long> count(p_probs.size());
  for (int i = 0; i < trials; ++i) count[emit(p, q_probs ? &q : nullptr, fixed, rng)]++;
  std::vector<double> expected(p.probs().begin(), p.probs().end());
  auto chi = test::chi_square(count, expected);
  std::printf("%-28s chi2 %.2f, dof %d, p-value %.4f\n", label, chi.statistic, chi.dof,
              chi.p_value);
  // Fixed seed: deterministic. A correct implementation passes at any sane level;
  // a wrong residual shifts mass by percents, which at 200k trials gives p ~ 0.
  EXPECT_GT(chi.p_value, 0.001) << label;
  for (size_t i = 0; i < p_probs.size(); ++i) {
    if (p_probs[i] == 0) {
      EXPECT_EQ(count[i], 0) << label << ": token " << i << " has p = 0";
    }
  }
}

}  // namespace

TEST(SpeculativeSampling, EmittedTokensFollowPForAnyQ) {
  const std::vector<double> p{0.35, 0.25, 0.15, 0.1, 0.1, 0.05};
  const std::vector<double> q{0.1, 0.3, 0.05, 0.3, 0.15, 0.1};
  expect_matches_p("general q", p, &q);
  const std::vector<double> q_missing{0.0, 0.5, 0.0, 0.3, 0.2, 0.0};  // q = 0 where p > 0
  expect_matches_p("q = 0 where p > 0", p, &q_missing);
  const std::vector<double> p_missing{0.5, 0.0, 0.3, 0.0, 0.2, 0.0};  // p = 0 where q > 0
  expect_matches_p("p = 0 where q > 0", p_missing, &q);
  expect_matches_p("p = q", p, &p);
  expect_matches_p("q a point mass on a likely token", p, nullptr, 0);
  expect_matches_p("q a point mass, p(t) = 0", p_missing, nullptr, 1);
}

TEST(SpeculativeSampling, AcceptanceRateIsSumOfMinPQ) {
  // The probability of accepting a draft is sum_x min(p(x), q(x)).
  const std::vector<double> p{0.5, 0.3, 0.2}, q{0.2, 0.3, 0.5};
  auto pd = dist_of(p), qd = dist_of(q);
  Rng rng(7);
  const int trials = 100000;
  int accepted = 0, correction = -1;
  for (int i = 0; i < trials; ++i)
    accepted += accept_or_resample(pd, &qd, qd.sample(rng), rng, &correction);
  // Binomial standard deviation at 0.7: sqrt(0.21 / 1e5) = 0.0014; allow 5 sigma.
  EXPECT_NEAR(accepted / double(trials), 0.2 + 0.3 + 0.2, 0.007);
}

TEST(GreedyVerify, AcceptsWhileArgmaxMatchesThenCorrects) {
  const int V = 5;
  // Rows predict draft tokens 0..2 and the bonus: argmaxes 1, 3, 4, 2.
  std::vector<float> logits = {0, 9, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 9, 0, 0, 9, 0, 0};
  Draft d;
  d.tokens = {1, 3, 4};
  Rng rng(1);
  auto copy = logits;
  Verdict all = verify_draft(copy.data(), V, d, SamplingParams{}, {0}, rng);
  EXPECT_EQ(all.n_accepted, 3);
  EXPECT_EQ(all.token, 2);  // bonus
  d.tokens = {1, 2, 4};
  copy = logits;
  Verdict mid = verify_draft(copy.data(), V, d, SamplingParams{}, {0}, rng);
  EXPECT_EQ(mid.n_accepted, 1);
  EXPECT_EQ(mid.token, 3);  // the target's own token at the first mismatch
  d.tokens = {};
  copy = logits;
  Verdict none = verify_draft(copy.data(), V, d, SamplingParams{}, {0}, rng);
  EXPECT_EQ(none.n_accepted, 0);
  EXPECT_EQ(none.token, 1);  // plain decode
}

TEST(GreedyVerify, RepetitionPenaltySeesAcceptedDrafts) {
  // Row 1 prefers token 1 only slightly over token 2; token 1 was drafted at
  // position 0, so the penalty (context grown by the draft) flips row 1 to 2.
  const int V = 3;
  std::vector<float> logits = {0, 5, 0, 0, 2.0f, 1.5f, 1, 0, 0};
  Draft d;
  d.tokens = {1, 1};
  SamplingParams sp;
  sp.repetition_penalty = 2.0f;
  Rng rng(1);
  Verdict v = verify_draft(logits.data(), V, d, sp, {0}, rng);
  EXPECT_EQ(v.n_accepted, 1);
  EXPECT_EQ(v.token, 2);
}

TEST(NgramLookup, ProposesWhatFollowedTheMostRecentMatch) {
  // ... 7 8 9 | 1 2 3 4 5 | ... 1 2 3  -> 4 5 ...
  std::vector<int> t{7, 8, 9, 1, 2, 3, 4, 5, 6, 1, 2, 3};
  EXPECT_EQ(NgramDrafter::lookup(t, 3, 4), (std::vector<int>{4, 5, 6}));
  EXPECT_EQ(NgramDrafter::lookup(t, 10, 4), (std::vector<int>{4, 5, 6, 1, 2, 3}));
  // The most recent occurrence wins: "3" followed by 9 last time.
  std::vector<int> u{3, 4, 3, 9, 3};
  EXPECT_EQ(NgramDrafter::lookup(u, 2, 1), (std::vector<int>{9, 3}));
  // Longer n first: [5 3] matched at the start beats the later bare "3".
  std::vector<int> w{5, 3, 1, 3, 2, 5, 3};
  EXPECT_EQ(NgramDrafter::lookup(w, 1, 4), (std::vector<int>{1}));
  EXPECT_TRUE(NgramDrafter::lookup(std::vector<int>{1, 2, 3}, 4, 4).empty());
  EXPECT_TRUE(NgramDrafter::lookup(std::vector<int>{1, 2, 1}, 0, 4).empty());
}

TEST(AdaptiveK, PicksLongDraftsWhenVerifyIsCheapAndAcceptanceHigh) {
  const std::vector<int> ks{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  CostModel cheap;  // verifying 6 positions costs 10% more than 1
  cheap.record_verify(1, 10.0);
  cheap.record_verify(6, 11.0);
  cheap.record_draft_step(1, 0.5);
  EXPECT_GE(choose_draft_lengths({{0.9, 1, 12}}, ks, cheap)[0], 5);
  EXPECT_LE(choose_draft_lengths({{0.1, 1, 12}}, ks, cheap)[0], 1);
  // The cap (token limit, context) bounds the choice.
  EXPECT_EQ(choose_draft_lengths({{0.9, 1, 3}}, ks, cheap)[0], 3);
  // Verification as expensive per position as decoding: speculation cannot pay.
  CostModel linear;
  linear.record_verify(1, 10.0);
  linear.record_verify(6, 60.0);
  linear.record_draft_step(1, 3.0);
  EXPECT_EQ(choose_draft_lengths({{0.6, 1, 12}}, ks, linear)[0], 0);
  EXPECT_NEAR(expected_tokens(0.5, 2), 1.75, 1e-12);
}

TEST(AdaptiveK, ExtrapolatesVerifyCostNoFlatterThanPrefill) {
  // Two noisy decode points of a batch (3 positions slower than 4): the fitted
  // slope is flat, and 52 positions would look as cheap as 4.
  CostModel c;
  c.record_verify(3, 62.0);
  c.record_verify(4, 60.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(52), 60.0);
  // A prefill chunk costs 8 ms per position: a bound on each further one.
  c.record_prefill(100, 800.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(52), 60.0 + 48 * 8.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(4), 60.0) << "measured points stand";
  // The hopeful reading (whether exploring may pay) drops the floor.
  EXPECT_DOUBLE_EQ(c.verify_ms(52, CostModel::Reading::Hopeful), 60.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(52), 60.0 + 48 * 8.0) << "the floored reading is the default";
  // Between measured points the measurements rule, however flat.
  c.record_verify(20, 70.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(12), 65.0);
}

TEST(AdaptiveK, ChargesTheCatchUpAgainstTheTokensLeft) {
  const std::vector<int> ks{1, 2, 3, 4};
  CostModel c;  // decode 40 ms, +5 ms per verified position, draft step 10 ms
  c.record_verify(1, 40.0);
  c.record_verify(5, 60.0);
  c.record_draft_step(1, 10.0);
  // Without a catch-up, drafting at 0.8 pays (3 tokens at K = 3 in 85 ms).
  EXPECT_GT(choose_draft_lengths({{0.8, 1, 4}}, ks, c)[0], 0);
  // A 600 ms lazy prefill does not, for a request with 20 tokens left...
  EXPECT_EQ(choose_draft_lengths({{0.8, 1, 4, 600.0, 20}}, ks, c)[0], 0);
  // ...and does for one with 2000 left.
  EXPECT_GT(choose_draft_lengths({{0.8, 1, 4, 600.0, 2000}}, ks, c)[0], 0);
}

TEST(AdaptiveK, DraftStepPriorStandsInUntilAStepIsMeasured) {
  const std::vector<int> ks{1, 2, 3, 4};
  CostModel c;  // decode 40 ms, a pass over 4 positions 46 ms
  c.record_verify(1, 40.0);
  c.record_verify(4, 46.0);
  EXPECT_EQ(c.draft_step_ms(1), 0) << "no prior: drafting looks free";
  // A draft model streaming 30% of the target's bytes: 30% of the target's pass.
  c.set_draft_prior(0.3);
  EXPECT_DOUBLE_EQ(c.draft_step_ms(1), 12.0);
  EXPECT_DOUBLE_EQ(c.draft_step_ms(4), 0.3 * 46.0) << "for as many positions";
  EXPECT_FALSE(c.has_draft_step());
  EXPECT_GT(choose_draft_lengths({{0.9, 1, 4}}, ks, c)[0], 0);
  // A draft as costly as the target can never pay, so there is nothing to explore.
  CostModel same = c;
  same.set_draft_prior(1.0);
  EXPECT_EQ(choose_draft_lengths({{0.9, 1, 4}}, ks, same)[0], 0);
  // A measurement replaces the prior.
  c.record_draft_step(1, 9.0);
  EXPECT_TRUE(c.has_draft_step());
  EXPECT_DOUBLE_EQ(c.draft_step_ms(1), 9.0);
}

// Measured at one batch size, a draft step for a larger batch is priced as
// the target's pass grows from that many positions to as many as the batch.
TEST(AdaptiveK, DraftStepOfALargerBatchGrowsAsTheTargetsPass) {
  CostModel c;
  c.record_verify(1, 30.0);
  c.record_verify(4, 36.0);
  c.record_draft_step(1, 10.0);
  EXPECT_DOUBLE_EQ(c.draft_step_ms(1), 10.0);
  EXPECT_DOUBLE_EQ(c.draft_step_ms(4), 10.0 * 36.0 / 30.0);
  c.record_draft_step(4, 16.0);  // two measured sizes: linear between them
  EXPECT_DOUBLE_EQ(c.draft_step_ms(2), 12.0);
}

// A cost is the median of its last seven measurements: a burst of slow passes
// (the shared machine stalling) leaves it, a lasting change moves it after four.
TEST(AdaptiveK, ACostIsTheMedianOfItsLastSevenMeasurements) {
  RunningCost cost;
  EXPECT_EQ(cost.ms(), 0.0) << "unmeasured";
  cost.add(14.0);
  EXPECT_DOUBLE_EQ(cost.ms(), 14.0) << "the first measurement alone";
  cost.add(15.0);
  EXPECT_DOUBLE_EQ(cost.ms(), 14.5) << "two: their mean";
  for (double ms : {14.5, 14.8, 15.0}) cost.add(ms);
  // The burst of the trace in docs/decisions.md ("Costs are medians").
  for (double ms : {22.8, 40.0, 45.5}) cost.add(ms);
  EXPECT_DOUBLE_EQ(cost.ms(), 15.0) << "three stalls in seven: the median of the others' side";
  cost.add(14.6);  // the burst stays in the window until four more came
  EXPECT_DOUBLE_EQ(cost.ms(), 15.0);
  for (double ms : {30.0, 30.0, 30.0, 30.0}) cost.add(ms);
  EXPECT_DOUBLE_EQ(cost.ms(), 30.0) << "four of seven at the new level: followed";
}

// A count's own median is read once three passes were measured; a rescale
// (the machine changed speed) moves every measured cost by its factor, and the
// medians then follow new measurements at the new level.
TEST(AdaptiveK, ARescaleMovesEveryMeasuredCost) {
  CostModel c;
  c.record_verify(4, 40.0);
  c.record_verify(4, 41.0);
  EXPECT_EQ(c.own_verify_ms(4), 0.0) << "two passes: no median to hold a pass to yet";
  c.record_verify(4, 42.0);
  c.record_verify(9, 50.0);
  c.record_draft_step(4, 10.0);
  c.record_prefill(64, 64.0);
  EXPECT_DOUBLE_EQ(c.own_verify_ms(4), 41.0);
  EXPECT_EQ(c.own_verify_ms(9), 0.0);
  EXPECT_EQ(c.own_verify_ms(5), 0.0) << "an unmeasured count has no median of its own";
  c.rescale(0.5);
  EXPECT_DOUBLE_EQ(c.own_verify_ms(4), 20.5);
  EXPECT_DOUBLE_EQ(c.verify_ms(9), 25.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(6), 20.5 + 2 * (25.0 - 20.5) / 5);
  EXPECT_DOUBLE_EQ(c.draft_step_ms(4), 5.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(12), 25.0 + 3 * 0.9)
      << "beyond the largest: the slope of 0.9 ms a position, not prefill's 1 ms from before the "
         "rescale (now 0.5)";
  for (double ms : {21.0, 21.0}) c.record_verify(4, ms);
  EXPECT_DOUBLE_EQ(c.own_verify_ms(4), 21.0) << "the rescaled window and new passes together";
}

// A count's reading is the cheapest of its own cost and every larger count's:
// four requests' plain point raised by a burst of slow rounds (and not measured
// again while the batch drafts) reads as the pass over five positions does.
TEST(AdaptiveK, APassOverFewerPositionsNeverReadsDearer) {
  CostModel c;
  c.record_verify(1, 20.0);
  c.record_verify(4, 35.0);  // the burst
  c.record_verify(5, 27.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(4), 27.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(1), 20.0) << "a cheaper count keeps its own";
  EXPECT_DOUBLE_EQ(c.verify_ms(5), 27.0) << "a larger count is not lowered";
  EXPECT_DOUBLE_EQ(c.verify_ms(3), 20.0 + 2 * (27.0 - 20.0) / 3) << "between, on the readings";
  // Once the larger count reads dearer (its own rounds slow), four's own cost
  // shows again: the envelope follows every point's own average.
  for (int i = 0; i < 4; ++i) c.record_verify(5, 50.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(4), 35.0);
  EXPECT_DOUBLE_EQ(c.verify_ms(5), 50.0) << "the median of 27, 50, 50, 50, 50";
  // The same rule for draft steps by batch.
  c.record_draft_step(2, 12.0);
  c.record_draft_step(4, 9.0);
  EXPECT_DOUBLE_EQ(c.draft_step_ms(2), 9.0);
  EXPECT_DOUBLE_EQ(c.draft_step_ms(4), 9.0);
}

TEST(AdaptiveK, InABatchOnlyPromisingRequestsDraft) {
  // Verify cost grows with positions: 4 requests decoding already use 4.
  CostModel c;
  c.record_verify(4, 10.0);
  c.record_verify(24, 30.0);
  c.record_draft_step(2, 0.1);
  auto k = choose_draft_lengths({{0.95, 1, 8}, {0.05, 1, 8}, {0.9, 1, 8}, {0.1, 1, 8}}, {4}, c);
  EXPECT_EQ(k[0], 4);
  EXPECT_EQ(k[2], 4);
  EXPECT_EQ(k[1], 0);
  EXPECT_EQ(k[3], 0);
}

TEST(AdaptiveK, AMarginKeepsThinGainsPlain) {
  // Two requests: plain 2 tokens in 20 ms; drafting one token each, 2.8 tokens
  // expected (acceptance 0.4) in 2 + 24 ms: 7.7% more tokens per ms.
  CostModel c;
  c.record_verify(2, 20.0);
  c.record_verify(4, 24.0);
  c.record_draft_step(2, 2.0);
  const std::vector<DraftCandidate> batch{{0.4, 1, 1}, {0.4, 1, 1}};
  const auto none = CostModel::Reading::Floored;
  EXPECT_EQ(choose_draft_lengths(batch, {1}, c, none, 0.0), (std::vector<int>{1, 1}));
  EXPECT_EQ(choose_draft_lengths(batch, {1}, c, none, 0.05), (std::vector<int>{1, 1}));
  EXPECT_EQ(choose_draft_lengths(batch, {1}, c, none, 0.1), (std::vector<int>{0, 0}));
}

TEST(DraftStop, CalibrationLearnsAcceptanceByConfidence) {
  ConfidenceCalibration cal;
  // Before any verdict a token is accepted about as often as the draft is sure.
  EXPECT_NEAR(cal.acceptance(0.92f), 0.925, 1e-9);
  // This draft is overconfident at 0.9 and right at 0.3 more often than it thinks.
  for (int i = 0; i < 500; ++i) {
    cal.record(0.9f, i % 2 == 0);
    cal.record(0.3f, i % 4 != 0);
  }
  EXPECT_NEAR(cal.acceptance(0.9f), 0.5, 0.05);
  EXPECT_NEAR(cal.acceptance(0.3f), 0.75, 0.05);
  // A verified draft counts its tokens up to the first rejection, no further.
  ConfidenceCalibration fresh;
  Draft d;
  d.tokens = {1, 2, 3};
  d.confidence = {0.01f, 0.51f, 0.99f};
  for (int i = 0; i < 500; ++i) fresh.record(d, 1);
  EXPECT_GT(fresh.acceptance(0.01f), 0.95);           // accepted every time
  EXPECT_LT(fresh.acceptance(0.51f), 0.05);           // rejected every time
  EXPECT_NEAR(fresh.acceptance(0.99f), 0.975, 1e-9);  // never judged: its prior
}

TEST(DraftStop, DraftsOnWhileTheNextTokenPaysForItself) {
  ConfidenceCalibration cal;  // acceptance = confidence (the prior)
  CostModel costs;            // decode 10 ms, +1 ms per verified position, draft step 2 ms
  costs.record_verify(1, 10.0);
  costs.record_verify(6, 15.0);
  costs.record_draft_step(1, 2.0);
  // At plain decoding's rate (0.1 token/ms) a further token costs 3 ms, so it
  // must be expected to add 0.3 tokens: reach x next alpha (0.8) >= 0.3.
  CostAwareStop stop(cal, costs, {0.8}, 1, 1, 0.1);
  Draft d;
  d.tokens = {7, 8};
  d.confidence = {0.97f, 0.97f};  // reach 0.95: keep going
  EXPECT_TRUE(stop.keep_drafting(0, d, 1, 2));
  d.confidence = {0.97f, 0.32f};  // reach 0.31: 0.25 expected
  EXPECT_FALSE(stop.keep_drafting(0, d, 1, 2));
  // A faster engine asks more of each token.
  CostAwareStop fast(cal, costs, {0.8}, 1, 1, 0.4);
  d.confidence = {0.97f, 0.97f};
  EXPECT_FALSE(fast.keep_drafting(0, d, 1, 2));
  // Without confidences there is nothing to judge by.
  d.confidence.clear();
  EXPECT_TRUE(fast.keep_drafting(0, d, 1, 2));
}

TEST(DraftStop, NeverAsksLessThanPlainDecodingsRate) {
  ConfidenceCalibration cal;  // acceptance = the confidence bucket's midpoint
  CostModel costs;            // 4 requests decode in 40 ms: plain decoding makes 0.1 token/ms
  costs.record_verify(4, 40.0);
  costs.record_verify(8, 60.0);
  costs.record_draft_step(4, 8.0);
  // Slow speculative rounds (0.02 token/ms recently) do not lower the bar.
  const std::vector<double> alpha(4, 0.8);
  CostAwareStop stop(cal, costs, alpha, 4, 4, 0.02);
  EXPECT_DOUBLE_EQ(stop.bar(), 0.1);
  // A third token costs 2 ms (a quarter of a draft step) and 5 ms of verifying
  // (past 8 positions, the slope of the measured points), so it must be expected
  // to add 0.7 tokens at 0.1 token/ms; reach 0.975 x 0.775 x next alpha 0.8 = 0.6.
  Draft d;
  d.tokens = {7, 8};
  d.confidence = {0.97f, 0.75f};
  EXPECT_FALSE(stop.keep_drafting(0, d, 4, 8));
  // Where plain decoding is slower still (0.01 token/ms), the recent rate
  // rules, and at 0.02 token/ms the same token pays (0.14 needed).
  CostModel slow;
  slow.record_verify(4, 400.0);
  slow.record_verify(8, 420.0);
  slow.record_draft_step(4, 8.0);
  CostAwareStop slow_stop(cal, slow, alpha, 4, 4, 0.02);
  EXPECT_DOUBLE_EQ(slow_stop.bar(), 0.02);
  EXPECT_TRUE(slow_stop.keep_drafting(0, d, 4, 8));
  // A faster engine asks more.
  EXPECT_DOUBLE_EQ(CostAwareStop(cal, costs, alpha, 4, 4, 0.3).bar(), 0.3);
}

// A draft step costs what it costs however many requests take it: with three of
// four requests stopped, the one that drafts on pays the whole step.
TEST(DraftStop, ALoneStepIsChargedWhole) {
  ConfidenceCalibration cal;  // acceptance = the confidence bucket's midpoint
  CostModel costs;            // 4 requests: 40 ms a plain pass, +1 ms per position
  costs.record_verify(4, 40.0);
  costs.record_verify(12, 48.0);
  costs.record_draft_step(4, 8.0);  // and about as much for one request alone
  costs.record_draft_step(1, 7.0);
  const std::vector<double> alpha(4, 0.8);
  CostAwareStop stop(cal, costs, alpha, 4, 4, 0.1);
  Draft d;
  d.tokens = {7};
  d.confidence = {0.97f};  // reach 0.975 x next alpha 0.8 = 0.78 expected
  // Shared by four: 2 ms of the step and 1 ms of verifying, 0.3 tokens at 0.1
  // token/ms: it pays. Taken alone: 7 + 1 ms, 0.8 tokens: it does not.
  EXPECT_TRUE(stop.keep_drafting(0, d, 4, 4));
  EXPECT_FALSE(stop.keep_drafting(0, d, 1, 4));
}

TEST(DraftStop, TrimsOnlyGreedyDrafts) {
  ConfidenceCalibration cal;
  CostModel costs;  // each verified position costs 5 ms
  costs.record_verify(1, 10.0);
  costs.record_verify(3, 20.0);
  CostAwareStop stop(cal, costs, {0.8, 0.8}, 2, 2, 0.1);
  std::vector<Draft> drafts(2);
  for (Draft& d : drafts) {
    d.tokens = {4, 5, 6};
    d.confidence = {0.97f, 0.97f, 0.12f};  // the third: reach 0.11 for 0.5 token's cost
  }
  for (int i = 0; i < 3; ++i)
    drafts[1].q.emplace_back();  // sampled: dropping a token for its value would bias the output
  stop.trim(drafts);
  EXPECT_EQ(drafts[0].tokens, (std::vector<int>{4, 5}));
  EXPECT_EQ(drafts[0].confidence.size(), 2u);
  EXPECT_EQ(drafts[1].tokens.size(), 3u);
}

TEST(LookupFirst, LookupLengthKeepsTheChanceOfFullAcceptanceAboveAQuarter) {
  // 0.9^13 = 0.254, 0.9^14 = 0.229; 0.5^2 = 0.25.
  EXPECT_EQ(LookupFirstDrafter::lookup_length(0.9, 32), 13);
  EXPECT_EQ(LookupFirstDrafter::lookup_length(0.9, 5), 5);
  EXPECT_EQ(LookupFirstDrafter::lookup_length(0.5, 32), 2);
  EXPECT_EQ(LookupFirstDrafter::lookup_length(0.1, 32), 1);  // at least one token
  EXPECT_EQ(LookupFirstDrafter::lookup_length(1.0, 7), 7);
  EXPECT_EQ(LookupFirstDrafter::lookup_length(0.9, 0), 0);
}

TEST(ChiSquare, UpperTailMatchesKnownQuantiles) {
  // Table values: chi2(4) 0.95 quantile 9.488; chi2(10) 0.99 quantile 23.209.
  EXPECT_NEAR(test::chi_square_upper_tail(9.488, 4), 0.05, 1e-4);
  EXPECT_NEAR(test::chi_square_upper_tail(23.209, 10), 0.01, 1e-4);
  EXPECT_NEAR(test::chi_square_upper_tail(1.0, 1), 0.3173, 1e-4);
}

namespace {

// Random distributions over V tokens, some tokens at zero.
std::vector<double> random_dist(std::mt19937& gen, int V, double zero_share) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> p(V);
  double z = 0;
  for (double& x : p) z += x = u(gen) < zero_share ? 0.0 : std::pow(u(gen), 3.0);
  if (z == 0) p[0] = z = 1;
  for (double& x : p) x /= z;
  return p;
}

std::vector<float> log_of(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(x > 0 ? static_cast<float>(std::log(x)) : -INFINITY);
  return l;
}

}  // namespace

// Reproducible mode accepts a drafted token iff the draft's Gumbel winner under q
// is the target's under p (the same noise). Its acceptance is exactly
//   sum_i 1 / sum_j max(p_j / p_i, q_j / q_i)
// (token i wins both races iff every E_j exceeds E_i max(p_j/p_i, q_j/q_i), E the
// exponential race's variables), and never below (1 - TV) / (1 + TV) (Daliri et
// al. 2024). Checked exactly on random pairs, and by 20,000 positions of the real
// noise against the exact value (4 standard deviations: a test that fails by
// chance once in 16,000 runs, deterministic at fixed seeds).
TEST(ReproducibleVerify, AcceptanceOfTheCouplingIsAtLeastTheBound) {
  std::mt19937 gen(77);
  for (int pair = 0; pair < 12; ++pair) {
    const int V = 4 + pair * 3;
    const auto p = random_dist(gen, V, 0.2), q = random_dist(gen, V, 0.2);
    double tv = 0, exact = 0;
    for (int i = 0; i < V; ++i) tv += 0.5 * std::abs(p[i] - q[i]);
    for (int i = 0; i < V; ++i) {
      if (p[i] == 0 || q[i] == 0) continue;
      double denom = 0;
      for (int j = 0; j < V; ++j) denom += std::max(p[j] / p[i], q[j] / q[i]);
      exact += 1 / denom;
    }
    const double bound = (1 - tv) / (1 + tv);
    EXPECT_GE(exact, bound - 1e-12) << "pair " << pair;
    EXPECT_LE(exact, 1 - tv + 1e-12) << "no coupling beats 1 - TV";

    const auto lp = log_of(p), lq = log_of(q);
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.seed = 1000 + pair;
    GumbelSampler g;
    const int n = 20000;
    int same = 0;
    for (int pos = 0; pos < n; ++pos) {
      std::vector<float> rp = lp, rq = lq;
      same += g.choose(rp.data(), V, sp, pos) == g.choose(rq.data(), V, sp, pos);
    }
    const double rate = double(same) / n, sd = std::sqrt(exact * (1 - exact) / n);
    std::printf("V=%2d TV %.3f: bound %.4f, exact %.4f, measured %.4f\n", V, tv, bound, exact,
                rate);
    EXPECT_NEAR(rate, exact, 4 * sd + 1e-9) << "pair " << pair;
  }
}

// A chain verified in reproducible mode emits exactly the tokens plain sampling
// with that seed takes at each position, whatever was drafted: the first
// mismatch is replaced by the target's own choice.
TEST(ReproducibleVerify, EmitsWhatPlainSamplingTakesWhateverTheDraft) {
  const int V = 6, k = 4;
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits((k + 1) * V);
    for (float& x : logits) x = u(gen);
    SamplingParams sp;
    sp.temperature = 0.8f;
    sp.seed = trial;
    const std::vector<int> context{1, 2, 3};
    // Plain: each row's own choice at its position.
    std::vector<int> plain;
    GumbelSampler g;
    for (int i = 0; i <= k; ++i) {
      std::vector<float> row(logits.begin() + i * V, logits.begin() + (i + 1) * V);
      plain.push_back(g.choose(row.data(), V, sp, static_cast<int64_t>(context.size()) + i));
    }
    Draft d;
    const int agree = trial % (k + 1);  // drafts matching plain before a wrong one
    for (int i = 0; i < k; ++i) d.tokens.push_back(i < agree ? plain[i] : (plain[i] + 1) % V);
    std::vector<float> copy = logits;
    Rng rng(1);
    const Verdict v = verify_draft(copy.data(), V, d, sp, context, rng);
    ASSERT_EQ(v.n_accepted, agree) << "trial " << trial;
    EXPECT_EQ(v.token, plain[agree]) << "trial " << trial;
  }
}

// An n-gram draft is a point mass on its token x: optimal mode accepts it with
// probability p(x) (the ratio p/q with q(x) = 1), and reproducible mode when the
// target's own Gumbel choice is x, also with probability p(x). So the two modes
// accept n-gram drafts equally often, by construction; checked over 100,000
// verifications each against p(x) (4 standard deviations, fixed seeds).
TEST(ReproducibleVerify, NgramDraftsAreAcceptedAsOftenAsInOptimalMode) {
  const std::vector<double> p{0.4, 0.25, 0.15, 0.1, 0.06, 0.04};
  const int V = static_cast<int>(p.size()), n = 100000;
  std::vector<float> rows(2 * V, 0.0f);
  for (int i = 0; i < V; ++i) rows[i] = static_cast<float>(std::log(p[i]));
  const std::vector<int> context{1, 2, 3};
  for (int x : {0, 2, 5}) {
    Draft d;
    d.tokens = {x};
    for (SamplingMode mode : {SamplingMode::Reproducible, SamplingMode::Optimal}) {
      SamplingParams sp;
      sp.temperature = 1.0f;
      sp.mode = mode;
      Rng rng(99);
      int accepted = 0;
      for (int trial = 0; trial < n; ++trial) {
        sp.seed = static_cast<uint64_t>(trial);  // reproducible mode's draws
        std::vector<float> logits = rows;
        accepted += verify_draft(logits.data(), V, d, sp, context, rng).n_accepted;
      }
      const double rate = double(accepted) / n, sd = std::sqrt(p[x] * (1 - p[x]) / n);
      EXPECT_NEAR(rate, p[x], 4 * sd) << sampling_mode_name(mode) << ", draft token " << x;
    }
  }
}
