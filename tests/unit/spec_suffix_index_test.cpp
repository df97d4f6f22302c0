// The suffix index of recent requests' text and the drafter that reads it
// (src/speculative/suffix_index.h, suffix_drafter.h): matches across requests,
// the longest match first, eviction under the token budget, tenant isolation,
// and what sync, finished and release do. Its greedy parity and distributions
// are tested with the other drafters' (spec_engine_test).
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "core/error.h"
#include "speculative/suffix_drafter.h"
#include "speculative/suffix_index.h"

using namespace tandem;

namespace {

std::vector<int> range(int from, int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A request as a drafter sees it, greedy.
struct FakeRequest {
  int id;
  std::vector<int> tokens;
  uint64_t tenant = 0;
  SamplingParams sampling = {};
  Rng rng{1};
  DraftContext context() { return {id, tokens, &sampling, &rng, nullptr, tenant}; }
};

Draft propose_one(SuffixDrafter& d, FakeRequest& r, int k) {
  std::vector<Draft> out;
  const DraftContext ctx = r.context();
  const int ks[] = {k};
  d.propose({&ctx, 1}, ks, out);
  return out[0];
}

}  // namespace

TEST(SuffixIndex, FindsWhatFollowedInAnEarlierDocument) {
  SuffixIndex index(1000);
  index.add(0, range(100, 50));  // 100 101 ... 149
  std::vector<int> out;
  const auto m = index.lookup(0, std::vector<int>{7, 8, 120, 121, 122, 123}, 5, 3, out);
  EXPECT_EQ(m.length, 4);
  EXPECT_EQ(out, range(124, 5));
  // The continuation stops at the document's end.
  index.lookup(0, std::vector<int>{145, 146, 147}, 10, 3, out);
  EXPECT_EQ(out, (std::vector<int>{148, 149}));
  // Shorter than min_match (or than the anchor): nothing.
  EXPECT_EQ(index.lookup(0, std::vector<int>{1, 120, 121}, 5, 3, out).length, 0);
  EXPECT_EQ(index.lookup(0, std::vector<int>{9, 121, 122}, 5, 4, out).length, 0);
  EXPECT_TRUE(out.empty());
}

TEST(SuffixIndex, TheLongestMatchWinsAndTheMostRecentAmongEquals) {
  SuffixIndex index(1000);
  // The anchor 5 6 7 occurs in three documents; the oldest matches 5 tokens back.
  index.add(0, std::vector<int>{1, 2, 5, 6, 7, 40, 41});
  index.add(0, std::vector<int>{9, 9, 5, 6, 7, 50, 51});
  index.add(0, std::vector<int>{8, 8, 5, 6, 7, 60, 61});
  std::vector<int> out;
  auto m = index.lookup(0, std::vector<int>{1, 2, 5, 6, 7}, 2, 3, out);
  EXPECT_EQ(m.length, 5);
  EXPECT_EQ(out, (std::vector<int>{40, 41}));
  m = index.lookup(0, std::vector<int>{3, 3, 5, 6, 7}, 2, 3, out);
  EXPECT_EQ(m.length, 3);
  EXPECT_EQ(out, (std::vector<int>{60, 61})) << "equal matches: the most recent";
}

TEST(SuffixIndex, EvictsTheOldestDocumentsToStayWithinItsBudget) {
  SuffixIndex index(100);
  for (int d = 0; d < 10; ++d) {
    index.add(0, range(1000 * (d + 1), 40));
    EXPECT_LE(index.tokens(), index.budget());
  }
  EXPECT_EQ(index.documents(), 2u);
  std::vector<int> out;
  for (int d = 0; d < 10; ++d) {
    const int base = 1000 * (d + 1);
    const auto m = index.lookup(0, std::vector<int>{base + 10, base + 11, base + 12}, 3, 3, out);
    if (d < 8) {
      EXPECT_EQ(m.length, 0) << "document " << d << " was evicted";
    } else {
      EXPECT_EQ(out, range(base + 13, 3)) << "document " << d << " is kept";
    }
  }
  // A document longer than the budget keeps its last tokens only.
  index.add(0, range(50000, 250));
  EXPECT_EQ(index.tokens(), 100u);
  EXPECT_EQ(index.lookup(0, std::vector<int>{50010, 50011, 50012}, 3, 3, out).length, 0);
  index.lookup(0, std::vector<int>{50200, 50201, 50202}, 3, 3, out);
  EXPECT_EQ(out, range(50203, 3));
}

TEST(SuffixIndex, ALookupReadsOnlyItsTenantsDocuments) {
  // Tenant 1 writes tokens 0..499 and 1000..1999 (its own), tenant 2 tokens
  // 0..499 and 2000..2999: the shared tokens make the same anchors. Whatever
  // tenant 2 asks, it must never receive a token only tenant 1's text holds.
  SuffixIndex index(4000);  // small enough that eviction runs too
  std::mt19937 rng(5);
  auto text = [&](int own_base) {
    std::vector<int> t;
    for (int i = 0; i < 200; ++i) {
      const bool shared = rng() % 2 == 0;
      t.push_back(shared ? static_cast<int>(rng() % 8) : own_base + static_cast<int>(rng() % 1000));
    }
    return t;
  };
  int found = 0;
  std::vector<int> out;
  for (int round = 0; round < 100; ++round) {
    index.add(1, text(1000));
    if (round % 3 == 0) index.add(2, text(2000));
    for (int q = 0; q < 20; ++q) {
      std::vector<int> ctx;
      for (int i = 0; i < 6; ++i) ctx.push_back(static_cast<int>(rng() % 8));
      const auto m = index.lookup(2, ctx, 8, 3, out);
      found += m.length > 0;
      for (int t : out) ASSERT_TRUE(t < 8 || (t >= 2000 && t < 3000)) << "tenant 1's token " << t;
    }
  }
  EXPECT_GT(found, 100) << "tenant 2 should find its own text";
  // And tenant 1 does see its own.
  index.add(1, std::vector<int>{3, 4, 5, 6, 1500});
  index.lookup(1, std::vector<int>{3, 4, 5, 6}, 1, 3, out);
  EXPECT_EQ(out, (std::vector<int>{1500}));
  index.lookup(2, std::vector<int>{3, 4, 5, 6}, 1, 3, out);
  EXPECT_TRUE(out.empty() || out[0] != 1500);
}

// Isolation does not rest on the hash: with every position in one chain (one
// head), another tenant's identical text is still never read.
TEST(SuffixIndex, IsolationHoldsWhenEveryAnchorCollides) {
  SuffixIndex index(1000, 1);
  index.add(1, std::vector<int>{5, 6, 7, 8, 1001, 1002});
  index.add(2, std::vector<int>{9, 6, 7, 8, 2001, 2002});
  std::vector<int> out;
  EXPECT_EQ(index.lookup(2, std::vector<int>{5, 6, 7, 8}, 2, 3, out).length, 3);
  EXPECT_EQ(out, (std::vector<int>{2001, 2002}))
      << "tenant 2's own, though tenant 1's matches longer";
  EXPECT_EQ(index.lookup(3, std::vector<int>{5, 6, 7, 8}, 2, 3, out).length, 0);
  EXPECT_TRUE(out.empty()) << "a tenant with no documents gets nothing";
  EXPECT_EQ(index.lookup(1, std::vector<int>{5, 6, 7, 8}, 2, 3, out).length, 4);
  EXPECT_EQ(out, (std::vector<int>{1001, 1002}));
}

TEST(SuffixIndex, RefusesABudgetWithNoRoomForAMatch) {
  EXPECT_THROW(SuffixIndex(3), Error);
  EXPECT_THROW(SuffixIndex(100, 3), Error) << "heads must be a power of two";
}

// A request's text joins the index when it finishes, under its tenant; a
// request of another tenant gets nothing from it.
TEST(SuffixDrafter, DraftsFromFinishedRequestsOfTheSameTenantOnly) {
  SuffixDrafter drafter;
  const std::vector<int> scaffold{900, 901, 902, 903, 904};  // e.g. a tool call's opening
  FakeRequest a{1, concat(concat(range(10, 20), scaffold), range(500, 8)), 7};
  // Still running: its text is nobody else's to draft from.
  FakeRequest b{2, concat(range(40, 10), scaffold), 7};
  EXPECT_TRUE(propose_one(drafter, b, 4).tokens.empty());
  drafter.release(a.id);  // preempted: still not finished
  EXPECT_TRUE(propose_one(drafter, b, 4).tokens.empty());
  drafter.finished(a.context());
  drafter.release(a.id);
  const Draft same = propose_one(drafter, b, 4);
  EXPECT_EQ(same.tokens, range(500, 4));
  EXPECT_GT(same.tag, SuffixDrafter::kBuckets) << "a draft from the shared index";
  FakeRequest c{3, concat(range(40, 10), scaffold), 8};  // another API key
  EXPECT_TRUE(propose_one(drafter, c, 4).tokens.empty());
  EXPECT_EQ(drafter.index().documents(), 1u);
}

TEST(SuffixDrafter, TakesTheLongerOfItsOwnAndTheSharedMatch) {
  SuffixDrafter drafter;
  // Elsewhere: 1 2 3 4 5 6 7 8 -> 70 71 72.
  FakeRequest done{1, std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 70, 71, 72}};
  drafter.finished(done.context());
  // Its own text has 7 8 -> 30 31 32 (a 2-token match), the index 6 tokens.
  FakeRequest r{2, std::vector<int>{7, 8, 30, 31, 32, 3, 4, 5, 6, 7, 8}};
  Draft d = propose_one(drafter, r, 3);
  EXPECT_EQ(d.tokens, (std::vector<int>{70, 71, 72}));
  EXPECT_EQ(d.tag, SuffixDrafter::tag_of(6, true));
  // Its own longer match wins over a shorter one elsewhere.
  FakeRequest s{3, std::vector<int>{9, 9, 5, 6, 7, 8, 40, 41, 9, 9, 5, 6, 7, 8}};
  d = propose_one(drafter, s, 2);
  EXPECT_EQ(d.tokens, (std::vector<int>{40, 41}));
  EXPECT_EQ(d.tag, SuffixDrafter::tag_of(6, false));
}

// Acceptance is learned per request and tag; release forgets the request.
TEST(SuffixDrafter, SyncLearnsPerRequestAndReleaseForgets) {
  SuffixDrafter drafter;
  FakeRequest a{1, std::vector<int>{5, 6, 7, 5, 6, 7, 5, 6}};
  FakeRequest b{2, a.tokens};
  Draft d = propose_one(drafter, a, 3);
  ASSERT_EQ(d.tokens, (std::vector<int>{7, 5, 6}));
  EXPECT_NEAR(d.alpha, 0.5, 1e-9) << "the prior with no evidence";
  for (int i = 0; i < 20; ++i) drafter.sync(a.context(), propose_one(drafter, a, 3), 0);
  EXPECT_LT(propose_one(drafter, a, 3).alpha, 0.1) << "twenty rejections";
  EXPECT_NEAR(propose_one(drafter, b, 3).alpha, 0.5, 1e-9) << "a's misses are not b's";
  drafter.release(a.id);
  EXPECT_NEAR(propose_one(drafter, a, 3).alpha, 0.5, 1e-9) << "release forgets the request";
  EXPECT_EQ(drafter.index().documents(), 0u) << "release alone adds no text";
}
