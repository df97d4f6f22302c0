// The rate guard alone: rounds of made-up rates, the verdicts they earn.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "speculative/rate_guard.h"

using namespace tandem;

namespace {

// Plain rounds of `batch` at 1 token per 10 ms per request.
void plain_rounds(RateGuard& g, int batch, int n) {
  for (int i = 0; i < n; ++i) g.record(batch, false, batch, 10);
}

// Drafted rounds of `batch` at `tokens_per_request` per 20 ms, each asked for first.
int drafted_rounds(RateGuard& g, int batch, int n, int tokens_per_request) {
  int allowed = 0;
  for (int i = 0; i < n; ++i) {
    if (!g.allows(batch)) {
      g.record(batch, false, batch, 10);
      continue;
    }
    ++allowed;
    g.record(batch, true, batch * tokens_per_request, 20);
  }
  return allowed;
}

}  // namespace

// Drafted rounds at 1.5 tokens per 20 ms against plain's 1 per 10 ms lose:
// the verdict comes after judge_after rounds beyond the trial's start-up, not
// before.
TEST(RateGuard, TurnsOffWhereDraftedRoundsLose) {
  const RateGuardTuning t;
  RateGuard g(t);
  plain_rounds(g, 4, 3);
  EXPECT_EQ(g.trial(4), 0) << "no trial before the first drafted round";
  // Start-up rounds (a draft model catching up) are not judged, however slow.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(g.allows(4));
    g.record(4, true, 6, 500, /*start_up=*/true);
  }
  for (int i = 0; i + 1 < t.judge_after; ++i) {
    ASSERT_TRUE(g.allows(4));
    g.record(4, true, 6, 20);
    EXPECT_FALSE(g.drafting_off(4)) << "round " << i << ": too early to judge";
  }
  ASSERT_TRUE(g.allows(4));
  g.record(4, true, 6, 20);
  EXPECT_TRUE(g.drafting_off(4));
  EXPECT_GT(g.trial(4), 0);
  EXPECT_NEAR(g.drafted_rate(4), 0.3, 1e-9);
  EXPECT_NEAR(g.plain_rate(4), 0.4, 1e-9);
  EXPECT_FALSE(g.drafting_off(2)) << "other batch sizes are judged on their own rounds";
}

// Off, a batch size waits retry_after rounds for a trial; a trial that loses
// doubles the wait, up to retry_after << max_backoff. (Trials here cost little
// against a trial_share of 1, so that the waits are the schedule's.)
TEST(RateGuard, TrialsBackOffWhileTheyLose) {
  RateGuardTuning t;
  t.trial_share = 1;
  RateGuard g(t);
  plain_rounds(g, 2, 3);
  drafted_rounds(g, 2, t.judge_after, 1);  // 1 token per 20 ms: loses
  ASSERT_TRUE(g.drafting_off(2));
  int last_trial = g.trial(2);
  for (int trial = 0; trial < t.max_backoff + 2; ++trial) {
    const int wait = t.retry_after << std::min(trial, t.max_backoff);
    for (int r = 1; r < wait; ++r) ASSERT_FALSE(g.allows(2)) << "trial " << trial << " round " << r;
    ASSERT_TRUE(g.allows(2)) << "trial " << trial;
    EXPECT_FALSE(g.drafting_off(2));
    EXPECT_GT(g.trial(2), last_trial) << "each retry is a trial of its own";
    last_trial = g.trial(2);
    g.record(2, true, 2, 20);
    // Its rounds (and a plain refresh when one is due) until the verdict.
    for (int n = 0; !g.drafting_off(2) && n < 4 * t.judge_after; ++n)
      g.allows(2) ? g.record(2, true, 2, 20) : g.record(2, false, 2, 10);
    ASSERT_TRUE(g.drafting_off(2)) << "trial " << trial << " lost";
  }
}

// A trial's shortfall against the plain rate (its start-up's and its judged
// rounds') sets the wait before the next one: at least shortfall /
// (trial_share x a plain round's ms) rounds, so that trials that lose by much
// cost at most that share of the time; those lost by a hair keep the
// schedule's wait.
TEST(RateGuard, ADearTrialWaitsUntilItIsPaidFor) {
  const RateGuardTuning t;
  // Plain: 4 tokens per 10 ms. Each trial: a start-up round of 4 tokens in
  // `first_ms` (a draft model catching up), then judge_after rounds of 4
  // tokens per `later_ms`.
  auto wait_after_trial = [&](double first_ms, double later_ms) {
    RateGuard g(t);
    plain_rounds(g, 4, 3);
    EXPECT_TRUE(g.allows(4));
    g.record(4, true, 4, first_ms, /*start_up=*/true);
    for (int i = 0; i < t.judge_after; ++i) {
      EXPECT_TRUE(g.allows(4));
      g.record(4, true, 4, later_ms);
    }
    EXPECT_TRUE(g.drafting_off(4));
    int wait = 1;
    while (!g.allows(4)) ++wait;
    return wait;
  };
  // Shortfall judge_after x 10 ms, and the start-up's 290; a plain round is
  // 10 ms, of which trial_share pays for it.
  EXPECT_EQ(wait_after_trial(300, 20),
            static_cast<int>((t.judge_after * 10 + 290) / (t.trial_share * 10)));
  EXPECT_EQ(wait_after_trial(10, 20), static_cast<int>(t.judge_after * 10 / (t.trial_share * 10)))
      << "the same verdict: the start-up is not judged";
  // Shortfall judge_after x 0.3 ms (4 tokens in 10.3 ms: still below
  // keep_above): paid for before the schedule's retry_after.
  ASSERT_LT(t.judge_after * 0.3 / (t.trial_share * 10), t.retry_after);
  EXPECT_EQ(wait_after_trial(10, 10.3), t.retry_after);
}

// Drafting that wins stays on; a batch size drafted from its first round is
// given its plain reference rounds, then refresh_rounds plain rounds after
// every plain_refresh drafted ones.
TEST(RateGuard, WinningDraftsStayOnWithAPlainReference) {
  const RateGuardTuning t;
  RateGuard g(t);
  const int n = 10 * t.plain_refresh;
  const int allowed = drafted_rounds(g, 3, n, 3);  // 3 tokens per 20 ms: wins
  EXPECT_FALSE(g.drafting_off(3));
  EXPECT_GT(g.plain_rate(3), 0) << "a plain reference was taken";
  const int plain = n - allowed;
  const double refreshes = static_cast<double>(n) / (t.plain_refresh + t.refresh_rounds);
  EXPECT_NEAR(plain, t.plain_reference + t.refresh_rounds * refreshes, t.refresh_rounds + 1);
}

// A plain reference taken in a slow stretch (4 tokens per 40 ms) ages while
// the batch drafts: the refresh (plain now 4 per 25 ms) all but replaces it,
// and drafted rounds at 7 tokens per 50 ms, 1.4x the old reference but 0.875x
// plain now, turn off on the first drafted round after it. (One plain round a
// refresh moving the reference a tenth of the way, they stayed on.)
TEST(RateGuard, APlainReferenceAgesWhileTheBatchDrafts) {
  const RateGuardTuning t;
  RateGuard g(t);
  for (int i = 0; i < t.plain_reference; ++i) g.record(4, false, 4, 40);
  int rounds = 0;
  while (!g.drafting_off(4) && rounds < 10 * t.plain_refresh) {
    g.allows(4) ? g.record(4, true, 7, 50) : g.record(4, false, 4, 25);
    ++rounds;
  }
  EXPECT_TRUE(g.drafting_off(4));
  EXPECT_EQ(rounds, t.plain_refresh + t.refresh_rounds + 1);
  // Tolerance: the old rounds keep 0.9^64 (about 0.001) of their weight.
  EXPECT_NEAR(g.plain_rate(4), 0.16, 1e-3);
}

// A trial is judged on its own rounds: the drafted rounds that lost before it
// do not count against text that has turned predictable.
TEST(RateGuard, ATrialThatWinsTurnsDraftingBackOn) {
  const RateGuardTuning t;
  RateGuard g(t);
  plain_rounds(g, 1, 3);
  drafted_rounds(g, 1, t.judge_after, 1);
  ASSERT_TRUE(g.drafting_off(1));
  // The judged rounds fell 10 ms short each (20 ms for what plain does in 10):
  // the wait pays for them at trial_share of a 10 ms plain round.
  const int wait = static_cast<int>(t.judge_after * 10 / (t.trial_share * 10));
  for (int r = 1; r < wait; ++r) ASSERT_FALSE(g.allows(1)) << "round " << r;
  const int allowed = drafted_rounds(g, 1, 50, 4);  // 4 tokens per 20 ms: wins
  EXPECT_FALSE(g.drafting_off(1));
  EXPECT_GE(allowed, 50 - t.refresh_rounds) << "all but a plain refresh";
}

// Drafted rounds a hair below plain (within keep_above) are noise, not a loss:
// drafting stays on.
TEST(RateGuard, AHairBelowPlainIsNotALoss) {
  const RateGuardTuning t;
  RateGuard g(t);
  plain_rounds(g, 2, 3);  // 0.2 tokens per ms
  ASSERT_GT(t.plain_refresh, t.judge_after + 1);
  for (int i = 0; i < t.plain_refresh; ++i) {  // judged, and no plain refresh due yet
    ASSERT_TRUE(g.allows(2));
    g.record(2, true, 2 * 199, 2 * 1000);  // 0.199 tokens per ms: 0.995x plain
  }
  EXPECT_FALSE(g.drafting_off(2));
  EXPECT_TRUE(g.judged(2));
}

// A load's rounds that decode fewer requests (the others' prompts still
// prefilling) deliver less in plain as well: at four requests on two cores,
// 3 tokens in 25.5 ms against 4 in 26.7 (bench serve, chat prompts). Drafted
// rounds of the whole batch at 0.88x the whole batch's plain rate, with the
// plain rounds among them mostly such short ones (the batch drafts whole and
// decodes plain while a new request prefills), lose: held to one plain rate
// for the load, they passed.
TEST(RateGuard, DraftedRoundsAreHeldToPlainRoundsDecodingAsMany) {
  const RateGuardTuning t;
  RateGuard g(t);
  const double full_ms = 26.7, short_ms = 25.5;  // plain: 4 tokens, 3 tokens
  for (int i = 0; i < t.plain_reference; ++i) g.record(4, false, 4, full_ms, false, 4);
  const double drafted_ms = 2 * full_ms / 0.88;  // 8 tokens: 0.88x the full rate
  for (int r = 0; r < 3 * t.judge_after && !g.drafting_off(4); ++r) {
    if (r % 3 == 2) {
      g.record(4, false, 3, short_ms, false, 3);  // a new request prefills
      continue;
    }
    ASSERT_TRUE(g.allows(4)) << "round " << r;
    g.record(4, true, 8, drafted_ms, false, 4);
  }
  EXPECT_TRUE(g.drafting_off(4));
  EXPECT_NEAR(g.plain_rate(4), 4 / full_ms, 1e-9);
  EXPECT_NEAR(g.plain_rate(4, 3), 3 / short_ms, 1e-9);
}

// The other way round: short drafted rounds are held to short plain rounds, not
// to the whole batch's rate that they could never reach. Drafted rounds of
// three decoding at 1.1x three's plain rate (0.82x four's) win.
TEST(RateGuard, ShortDraftedRoundsAreHeldToShortPlainRounds) {
  const RateGuardTuning t;
  RateGuard g(t);
  for (int i = 0; i < t.plain_reference; ++i) {
    g.record(4, false, 4, 26.7, false, 4);
    g.record(4, false, 3, 25.5, false, 3);
  }
  for (int r = 0; r < 2 * t.judge_after; ++r) {
    ASSERT_TRUE(g.allows(4)) << "round " << r;
    g.record(4, true, 6, 2 * 25.5 / 1.1, false, 3);
  }
  EXPECT_FALSE(g.drafting_off(4));
  EXPECT_TRUE(g.judged(4));
  EXPECT_NEAR(g.drafted_over_plain(4), 1.1, 1e-9);
}

// A count of decoding requests without plain rounds of its own is valued at the
// nearest measured count's rate, scaled by the requests (a plain step costs
// about the same for a few more or fewer); none measured at all: 0.
TEST(RateGuard, AnUnmeasuredCountIsScaledFromTheNearestOne) {
  RateGuard g;
  EXPECT_EQ(g.plain_rate(4, 2), 0);
  g.record(4, false, 4, 20, false, 4);  // 0.2 tokens per ms
  g.record(4, false, 1, 10, false, 1);  // 0.1 tokens per ms
  EXPECT_NEAR(g.plain_rate(4, 3), 0.2 * 3 / 4, 1e-9) << "4 is as near as 2 and measured";
  EXPECT_NEAR(g.plain_rate(4, 2), 0.1 * 2, 1e-9) << "1 is nearer than 4";
  EXPECT_NEAR(g.plain_rate(4), 0.2, 1e-9) << "0: the whole batch";
}

// A trial that passes its first verdict and loses a few rounds later waits for
// all it cost, its start-up included: a verdict to keep drafting forgives
// nothing that drafting has not earned back. (Forgiven, such a trial at four
// requests on chat prompts came back after retry_after rounds and paid its
// start-up again: a 10 s bench serve level lost 3%.)
TEST(RateGuard, APassingVerdictForgivesNoCost) {
  const RateGuardTuning t;
  RateGuard g(t);
  plain_rounds(g, 4, 3);  // 4 tokens per 10 ms
  ASSERT_TRUE(g.allows(4));
  g.record(4, true, 4, 300, /*start_up=*/true);  // 290 ms short
  for (int i = 0; i < t.judge_after; ++i) {      // exactly plain: passes
    ASSERT_TRUE(g.allows(4));
    g.record(4, true, 4, 10);
  }
  ASSERT_TRUE(g.judged(4));
  ASSERT_FALSE(g.drafting_off(4));
  int losing = 0;  // then 4 tokens per 20 ms, until the verdict turns
  while (!g.drafting_off(4) && losing < 100) {
    ASSERT_TRUE(g.allows(4));
    g.record(4, true, 4, 20);
    ++losing;
  }
  ASSERT_TRUE(g.drafting_off(4));
  int wait = 1;
  while (!g.allows(4)) ++wait;
  EXPECT_EQ(wait, static_cast<int>((290 + losing * 10) / (t.trial_share * 10)));
}

// A trial whose gains have paid back its cost is no loss in a row: the wait
// after it is the schedule's first.
TEST(RateGuard, ATrialThatPaidForItselfResetsTheBackoff) {
  RateGuardTuning t;
  t.trial_share = 1;  // waits by the schedule alone
  RateGuard g(t);
  plain_rounds(g, 2, 3);                   // 2 tokens per 10 ms
  drafted_rounds(g, 2, t.judge_after, 1);  // loses: off, one failed trial
  ASSERT_TRUE(g.drafting_off(2));
  for (int r = 1; r < t.retry_after; ++r) ASSERT_FALSE(g.allows(2));
  // The retry wins well (2 tokens per 5 ms) and long, then loses.
  int rounds = 0;
  while (rounds < 2 * t.judge_after) {
    if (g.allows(2)) {
      g.record(2, true, 2, 5);
    } else {
      g.record(2, false, 2, 10);
    }
    ++rounds;
  }
  ASSERT_FALSE(g.drafting_off(2));
  // Losing from here, the first verdicts find the trial in credit (dips: short
  // waits); once the losses have eaten the credit, the loss waits the
  // schedule's first wait.
  auto lose_until_off = [&] {
    while (!g.drafting_off(2) && rounds < 5000) {
      g.allows(2) ? g.record(2, true, 1, 20) : g.record(2, false, 2, 10);
      ++rounds;
    }
    int wait = 1;
    while (!g.allows(2)) g.record(2, false, 2, 10), ++wait;
    return wait;
  };
  int wait = lose_until_off(), dips = 0;
  for (; wait == t.in_credit_wait && dips < 100; wait = lose_until_off()) ++dips;
  EXPECT_GE(dips, 1) << "the first verdict found the trial in credit";
  EXPECT_EQ(wait, t.retry_after) << "not doubled: the trial paid for itself";
}

// At one request drafted rounds deliver 1 to 4 tokens (acceptance 0.65, K = 3:
// 2.34 on average) in 72.5 ms against plain's token in 39.5 ms: 1.28x plain on
// the whole, while a window of ten rounds falls below keep_above now and then.
// Over 400 runs of 140 rounds (a bench serve level of 10 s), such dips, which
// find the trial in credit, cost a short wait each: plain rounds (the plain
// reference, its refreshes and the waits) are under a fifth of all, and the
// runs deliver at least 1.24x plain (16%, 1.25x). (Each dip a lost trial,
// waiting retry_after rounds: 26% plain rounds, 1.23x.)
TEST(RateGuard, ADipInCreditIsNotALoss) {
  const RateGuardTuning t;
  int plain = 0, rounds = 0;
  double tokens = 0, ms = 0;
  for (uint32_t seed = 0; seed < 400; ++seed) {
    std::mt19937 rng(seed);  // its sequence is the standard's, the same everywhere
    auto accepted = [&rng] { return rng() < static_cast<uint32_t>(0.65 * 4294967296.0); };
    RateGuard g(t);
    for (int r = 0; r < 140; ++r, ++rounds) {
      if (!g.allows(1)) {
        g.record(1, false, 1, 39.5);
        ++plain, tokens += 1, ms += 39.5;
        continue;
      }
      int emitted = 1;
      while (emitted < 4 && accepted()) ++emitted;
      g.record(1, true, emitted, 72.5);
      tokens += emitted, ms += 72.5;
    }
  }
  EXPECT_LT(plain, rounds / 5);
  EXPECT_GT(tokens / ms * 39.5, 1.24);
}

// Where every round of a load decodes one short (a request always
// prefilling), the refresh is of such rounds: drafting goes on after it.
// (Counted only from rounds of the whole batch, the refresh never ended and the
// load decoded plain for good.)
TEST(RateGuard, ARefreshIsOfTheRoundsDraftedRoundsDecode) {
  const RateGuardTuning t;
  RateGuard g(t);
  for (int i = 0; i < t.plain_reference; ++i) g.record(4, false, 3, 30, false, 3);
  const int n = 10 * t.plain_refresh;
  int allowed = 0;
  for (int i = 0; i < n; ++i) {
    if (g.allows(4)) {
      ++allowed;
      g.record(4, true, 6, 40, false, 3);  // 0.15 tokens/ms against plain's 0.1: wins
    } else {
      g.record(4, false, 3, 30, false, 3);
    }
  }
  EXPECT_FALSE(g.drafting_off(4));
  const double refreshes = static_cast<double>(n) / (t.plain_refresh + t.refresh_rounds);
  EXPECT_NEAR(n - allowed, t.refresh_rounds * refreshes, t.refresh_rounds + 1);
}

// The machine changed speed (speculative/speed_shift.h): every round recorded
// before takes the factor's milliseconds, so the plain reference, and with it
// the verdict, is of the machine as it now runs. Drafted rounds at 7 tokens per
// 50 ms win against plain's 4 per 40 ms; after the machine got 1.6x faster
// (plain now 4 per 25 ms), the same drafted rounds at 7 per 31.25 ms no longer
// win against a reference taken before.
TEST(RateGuard, ARescaleMovesEveryRecordedRound) {
  const RateGuardTuning t;
  RateGuard g(t);
  for (int i = 0; i < t.plain_reference; ++i) g.record(4, false, 4, 40);
  for (int i = 0; i < t.judge_after; ++i) {
    ASSERT_TRUE(g.allows(4));
    g.record(4, true, 7, 50);
  }
  EXPECT_NEAR(g.drafted_over_plain(4), 1.4, 1e-9);
  g.rescale(1 / 1.6);
  EXPECT_NEAR(g.plain_rate(4), 0.16, 1e-9);
  EXPECT_NEAR(g.drafted_rate(4), 0.224, 1e-9);
  EXPECT_NEAR(g.drafted_over_plain(4), 1.4, 1e-9) << "a rescale alone changes no verdict";
  EXPECT_FALSE(g.drafting_off(4));
}
