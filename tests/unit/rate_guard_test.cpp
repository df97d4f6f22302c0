// The rate guard alone: rounds of made-up rates, the verdicts they earn.
#include <gtest/gtest.h>

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
// the verdict comes after judge_after rounds beyond the first, not before.
TEST(RateGuard, TurnsOffWhereDraftedRoundsLose) {
  const RateGuardTuning t;
  RateGuard g(t);
  plain_rounds(g, 4, 3);
  // The first drafted round is not counted; the next judge_after are.
  for (int i = 0; i < t.judge_after; ++i) {
    ASSERT_TRUE(g.allows(4));
    g.record(4, true, 6, 20);
    EXPECT_FALSE(g.drafting_off(4)) << "round " << i << ": too early to judge";
  }
  ASSERT_TRUE(g.allows(4));
  g.record(4, true, 6, 20);
  EXPECT_TRUE(g.drafting_off(4));
  EXPECT_NEAR(g.drafted_rate(4), 0.3, 1e-9);
  EXPECT_NEAR(g.plain_rate(4), 0.4, 1e-9);
  EXPECT_FALSE(g.drafting_off(2)) << "other batch sizes are judged on their own rounds";
}

// Off, a batch size waits retry_after rounds for a trial; a trial that loses
// doubles the wait, up to retry_after << max_backoff.
TEST(RateGuard, TrialsBackOffWhileTheyLose) {
  const RateGuardTuning t;
  RateGuard g(t);
  plain_rounds(g, 2, 3);
  drafted_rounds(g, 2, t.judge_after + 1, 1);  // 1 token per 20 ms: loses
  ASSERT_TRUE(g.drafting_off(2));
  for (int trial = 0; trial < t.max_backoff + 2; ++trial) {
    const int wait = t.retry_after << std::min(trial, t.max_backoff);
    for (int r = 1; r < wait; ++r) ASSERT_FALSE(g.allows(2)) << "trial " << trial << " round " << r;
    ASSERT_TRUE(g.allows(2)) << "trial " << trial;
    EXPECT_FALSE(g.drafting_off(2));
    g.record(2, true, 2, 20);
    drafted_rounds(g, 2, t.judge_after, 1);
    ASSERT_TRUE(g.drafting_off(2)) << "trial " << trial << " lost";
  }
}

// Drafting that wins stays on; a batch size drafted from its first round is
// given its plain reference rounds, then a plain round every plain_refresh.
TEST(RateGuard, WinningDraftsStayOnWithAPlainReference) {
  const RateGuardTuning t;
  RateGuard g(t);
  const int n = 10 * t.plain_refresh;
  const int allowed = drafted_rounds(g, 3, n, 3);  // 3 tokens per 20 ms: wins
  EXPECT_FALSE(g.drafting_off(3));
  EXPECT_GT(g.plain_rate(3), 0) << "a plain reference was taken";
  const int plain = n - allowed;
  EXPECT_GE(plain, t.plain_reference + 9);
  EXPECT_LE(plain, t.plain_reference + 11);
}

// A trial is judged on its own rounds: the drafted rounds that lost before it
// do not count against text that has turned predictable.
TEST(RateGuard, ATrialThatWinsTurnsDraftingBackOn) {
  const RateGuardTuning t;
  RateGuard g(t);
  plain_rounds(g, 1, 3);
  drafted_rounds(g, 1, t.judge_after + 1, 1);
  ASSERT_TRUE(g.drafting_off(1));
  for (int r = 1; r < t.retry_after; ++r) ASSERT_FALSE(g.allows(1));
  const int allowed = drafted_rounds(g, 1, 50, 4);  // 4 tokens per 20 ms: wins
  EXPECT_FALSE(g.drafting_off(1));
  EXPECT_GE(allowed, 49);
}

// Drafted rounds a hair below plain (within keep_above) are noise, not a loss:
// drafting stays on.
TEST(RateGuard, AHairBelowPlainIsNotALoss) {
  const RateGuardTuning t;
  RateGuard g(t);
  plain_rounds(g, 2, 3);  // 0.2 tokens per ms
  for (int i = 0; i < 5 * t.judge_after; ++i) {
    ASSERT_TRUE(g.allows(2));
    g.record(2, true, 2 * 199, 2 * 1000);  // 0.199 tokens per ms: 0.995x plain
  }
  EXPECT_FALSE(g.drafting_off(2));
  EXPECT_TRUE(g.judged(2));
}
