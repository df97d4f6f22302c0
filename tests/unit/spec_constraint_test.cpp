// Constrained decoding and log-probabilities under speculation, on synthetic
// models: a constraint masks the target's p and the drafts' q alike, so greedy
// output is the same with and without speculation and sampled output follows
// the constrained distribution; reported log-probabilities are the same too.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/prompt_logits.h"
#include "sampling/logprobs.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"
#include "support/spec_harness.h"
#include "support/stats.h"
#include "support/test_util.h"

using namespace tandem;
using namespace tandem::test;

namespace {

// A toy grammar: generated tokens alternate between odd and even ids. It
// bites on every position, and cuts most lookups (5 6 7 5 6 ... alternates,
// but a prompt's runs mostly do not).
class AlternatingParity final : public TokenConstraint {
 public:
  std::unique_ptr<TokenConstraint> fork() const override {
    return std::make_unique<AlternatingParity>(*this);
  }
  bool mask(float* logits, int n_vocab) const override {
    if (last_ >= 0)
      for (int t = last_ % 2; t < n_vocab; t += 2) logits[t] = -INFINITY;
    return n_vocab > 1;
  }
  bool allows(int token) const override { return last_ < 0 || token % 2 != last_ % 2; }
  void advance(int token) override { last_ = token; }

 private:
  int last_ = -1;
};

bool keeps_to(const std::vector<int>& tokens) {
  AlternatingParity c;
  for (int t : tokens) {
    if (!c.allows(t)) return false;
    c.advance(t);
  }
  return true;
}

Request constrained(Request r) {
  r.params.constraint = std::make_shared<AlternatingParity>();
  return r;
}

}  // namespace

TEST(ConstrainedDecoding, GreedyOutputIsTheSameWithEveryDrafter) {
  const int V = 384;
  Models m = load_models(Arch::Qwen2, V, true);
  std::vector<Request> free, reqs;
  for (auto& p : spec_prompts(V)) {
    free.push_back(greedy_request(p, 64));
    reqs.push_back(constrained(greedy_request(p, 64)));
  }
  const auto plain = run(m, DraftKind::None, {}, reqs);
  const auto unconstrained = run(m, DraftKind::None, {}, free);
  int differ = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_TRUE(keeps_to(plain[i].tokens)) << "prompt " << i;
    differ += plain[i].tokens != unconstrained[i].tokens;
  }
  EXPECT_GT(differ, 0) << "the constraint never changed the output: the test shows nothing";
  for (auto kind : {DraftKind::SameQuantized, DraftKind::Other, DraftKind::Ngram,
                    DraftKind::OtherLookup, DraftKind::Suffix}) {
    for (SpecOptions so : {SpecOptions{4, false}, SpecOptions{8, true}}) {
      const auto spec = run(m, kind, so, reqs);
      int drafted = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_EQ(spec[i].tokens, plain[i].tokens)
            << "drafter " << int(kind) << " k " << so.k << " prompt " << i;
        drafted += spec[i].stats.drafted;
      }
      EXPECT_GT(drafted, 0) << "drafter " << int(kind) << ": speculation was not exercised";
    }
  }
}

// Drafts keep to the constraint before they are verified: a draft model masks
// its q, a lookup is cut at its first disallowed token.
TEST(ConstrainedDecoding, DraftsKeepToTheConstraint) {
  const int V = 384;
  Models m = load_models(Arch::Llama, V, false);
  const std::vector<int> prompt{5, 6, 7, 5, 6, 7, 5, 6};
  Sequence a(1, *m.target, constrained(greedy_request(prompt, 16)));
  a.accept(9);  // an even token next
  std::vector<int> lookup{8, 9, 11, 12};
  NgramDrafter::keep_within(*a.constraint(), lookup);
  EXPECT_EQ(lookup, (std::vector<int>{8, 9})) << "11 follows 9: cut there";

  ThreadPool pool(1);
  KVCacheConfig kv;
  kv.n_ctx = 64;
  ModelDrafter drafter(*m.same_q8, *m.target, pool, kv);
  std::vector<Draft> out;
  for (int round = 0; round < 6; ++round) {
    propose(drafter, {&a}, {6}, out);
    ASSERT_FALSE(out[0].tokens.empty());
    std::vector<int> seen(a.tokens().begin() + a.n_prompt(), a.tokens().end());
    seen.insert(seen.end(), out[0].tokens.begin(), out[0].tokens.end());
    EXPECT_TRUE(keeps_to(seen)) << "round " << round;
    a.accept(out[0].tokens[0]);
    drafter.sync(a.draft_context(), out[0], 1);
  }
}

// The chi-square test of sampled speculation, under the constraint: every
// drafter's output follows the constrained distribution exactly, in both
// sampling modes; in reproducible mode each trial is moreover token for token
// what plain sampling gave with its seed.
TEST(ConstrainedDecoding, SampledJointDistributionIsTheConstrainedOne) {
  const int V = 8;
  Models m = load_models(Arch::Llama, V, false);
  // Alternating, so that lookups keep to the constraint often enough to draft.
  const std::vector<int> prompt{4, 3, 4, 3, 4, 3, 4, 3};
  for (SamplingMode mode : {SamplingMode::Optimal, SamplingMode::Reproducible}) {
    SamplingParams sp;
    sp.temperature = 2.5f;
    sp.top_p = 0.99f;
    sp.mode = mode;
    AlternatingParity grammar;
    const auto joint = exact_joint(*m.target, prompt, sp, &grammar);
    const int trials = 20000;
    std::vector<Request> reqs = sampled_trials(prompt, sp, trials, 5000);
    for (auto& r : reqs) r = constrained(std::move(r));
    const std::pair<DraftKind, SpecOptions> setups[] = {{DraftKind::None, {2, false}},
                                                        {DraftKind::Other, {2, false}},
                                                        {DraftKind::SameQuantized, {3, false}},
                                                        {DraftKind::Ngram, {2, false}},
                                                        {DraftKind::Suffix, {2, false}}};
    std::vector<RequestResult> plain;
    for (auto [kind, so] : setups) {
      const auto results = run(m, kind, so, reqs);
      if (kind == DraftKind::None) plain = results;
      std::vector<long> count(joint.size());
      int drafted = 0;
      for (size_t i = 0; i < results.size(); ++i) {
        const auto& r = results[i];
        ASSERT_EQ(r.tokens.size(), 4u);
        ASSERT_TRUE(keeps_to(r.tokens));
        if (mode == SamplingMode::Reproducible) {
          ASSERT_EQ(r.tokens, plain[i].tokens) << "drafter " << int(kind) << " trial " << i;
        }
        count[(r.tokens[0] * V + r.tokens[1]) * V + r.tokens[2]]++;
        drafted += r.stats.drafted;
      }
      const auto chi = chi_square(count, joint);
      std::printf("constrained, %s, drafter %d: chi2 %.1f dof %d p-value %.4f (%d drafted)\n",
                  sampling_mode_name(mode), int(kind), chi.statistic, chi.dof, chi.p_value,
                  drafted);
      // Fixed seeds, so deterministic; a biased sampler moves probability by
      // percents, which 20,000 trials turn into p-values far below 0.001.
      EXPECT_GT(chi.p_value, 0.001) << "drafter " << int(kind);
      // Draft models draft in every request; lookups only where a match keeps to
      // the constraint.
      if (kind != DraftKind::None) {
        const bool lookup = kind == DraftKind::Ngram || kind == DraftKind::Suffix;
        EXPECT_GT(drafted, lookup ? trials / 5 : trials / 2) << int(kind);
      }
    }
  }
}

// Greedy requests report the same log-probabilities with and without
// speculation, bit for bit, one per generated token, and they are the log
// softmax of the model's logits for that position.
TEST(Logprobs, GreedyFiguresAreTheSameWithAndWithoutSpeculation) {
  const int V = 384;
  Models m = load_models(Arch::Qwen2, V, true);
  std::vector<Request> reqs;
  for (auto& p : spec_prompts(V)) {
    Request r = greedy_request(p, 24);
    r.params.logprobs = 3;
    reqs.push_back(constrained(r));
  }
  const auto plain = run(m, DraftKind::None, {}, reqs);
  for (auto kind : {DraftKind::SameQuantized, DraftKind::Ngram, DraftKind::Suffix}) {
    const auto spec = run(m, kind, {4, false}, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_EQ(spec[i].tokens, plain[i].tokens);
      ASSERT_EQ(spec[i].logprobs.size(), spec[i].tokens.size());
      for (size_t j = 0; j < spec[i].tokens.size(); ++j) {
        const TokenLogprobs& a = spec[i].logprobs[j];
        const TokenLogprobs& b = plain[i].logprobs[j];
        EXPECT_EQ(a.chosen.token, spec[i].tokens[j]);
        EXPECT_EQ(a.chosen.logprob, b.chosen.logprob) << "prompt " << i << " token " << j;
        ASSERT_EQ(a.top.size(), 3u);
        ASSERT_EQ(b.top.size(), 3u);
        for (int t = 0; t < 3; ++t) {
          EXPECT_EQ(a.top[t].token, b.top[t].token);
          EXPECT_EQ(a.top[t].logprob, b.top[t].logprob);
        }
        EXPECT_EQ(a.top[0].token, a.chosen.token) << "greedy: the chosen token is the likeliest";
      }
    }
  }
  // Against the model's own logits for the first generated token (float
  // tolerance: a log-sum-exp over 384 values in double, rounded to float).
  ThreadPool pool(1);
  const auto& prompt = reqs[0].prompt;
  auto logits = prompt_logits(*m.target, pool, prompt);
  std::vector<float> last(logits.end() - V, logits.end());
  double z = 0;
  for (float l : last) z += std::exp(static_cast<double>(l));
  EXPECT_NEAR(plain[0].logprobs[0].chosen.logprob, last[plain[0].tokens[0]] - std::log(z), 1e-4);
}

// Sampled requests report log p of their tokens under the distribution they
// were drawn from: the filters' zeros never appear among the alternatives.
TEST(Logprobs, SampledFiguresAreThoseOfTheSamplingDistribution) {
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 2;
  std::vector<float> logits{0.5f, 2.0f, 1.0f, -1.0f};
  SamplingDistribution p;
  p.compute(logits.data(), 4, sp);
  const TokenLogprobs lp = token_logprobs(2, logits.data(), 4, &p, 4);
  EXPECT_NEAR(std::exp(lp.chosen.logprob), p[2], 1e-6);
  ASSERT_EQ(lp.top.size(), 2u) << "top-k 2 leaves two tokens";
  EXPECT_EQ(lp.top[0].token, 1);
  EXPECT_EQ(lp.top[1].token, 2);
  EXPECT_NEAR(std::exp(lp.top[0].logprob) + std::exp(lp.top[1].logprob), 1.0, 1e-6);
}
