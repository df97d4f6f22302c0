// Draft trees as drafters build them and the policy prunes them: n-gram
// continuations merged into a tree, Draft::prune, a draft model's siblings.
#include <gtest/gtest.h>

#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"

using namespace tandem;

namespace {

// Siblings (nodes with one parent) hold distinct tokens, parents come first.
void expect_well_formed(const Draft& d) {
  ASSERT_EQ(d.parent.size(), d.tokens.size());
  for (size_t j = 0; j < d.tokens.size(); ++j) {
    EXPECT_LT(d.parent[j], static_cast<int>(j));
    EXPECT_GE(d.parent[j], -1);
    for (size_t i = 0; i < j; ++i)
      if (d.parent[i] == d.parent[j]) {
        EXPECT_NE(d.tokens[i], d.tokens[j]) << i << " " << j;
      }
  }
}

}  // namespace

TEST(NgramTree, ContinuationsAreMostTrustedFirstAndDistinct) {
  // "1 2 3" occurs three times before the tail, followed by 9, 8 and 7 (most
  // recent); "2 3" once more, followed by 8 again.
  const std::vector<int> t{1, 2, 3, 9, 4, 1, 2, 3, 8, 4, 2, 3, 8, 4, 1, 2, 3, 7, 4, 1, 2, 3};
  int n = 0;
  const auto conts = NgramDrafter::continuations(t, 2, 3, 1, 4, &n);
  EXPECT_EQ(n, 3);
  ASSERT_GE(conts.size(), 3u);
  EXPECT_EQ(conts[0], (std::vector<int>{7, 4}));
  EXPECT_EQ(conts[1], (std::vector<int>{8, 4}));
  EXPECT_EQ(conts[2], (std::vector<int>{9, 4}));
  // The first is the chain lookup() proposes.
  EXPECT_EQ(conts[0], NgramDrafter::lookup(t, 2, 3, 1));
  for (size_t i = 0; i < conts.size(); ++i)
    for (size_t j = 0; j < i; ++j) EXPECT_NE(conts[i], conts[j]);
}

TEST(NgramTree, MergeSharesPrefixesAndKeepsTheFirstAsMainChain) {
  Draft d;
  NgramDrafter::merge_into({{5, 6, 7}, {5, 6, 8}, {9, 1}, {5, 2}}, d);
  expect_well_formed(d);
  EXPECT_EQ(d.chain_length(), 3);
  EXPECT_EQ(d.depth(), 3);
  EXPECT_EQ(d.tokens, (std::vector<int>{5, 6, 7, 8, 9, 1, 2}));
  EXPECT_EQ(d.parent, (std::vector<int>{-1, 0, 1, 1, -1, 4, 0}));
  // Continuations on one path make a chain.
  Draft chain;
  NgramDrafter::merge_into({{5, 6, 7}, {5, 6}}, chain);
  EXPECT_FALSE(chain.is_tree());
  EXPECT_EQ(chain.tokens, (std::vector<int>{5, 6, 7}));
}

TEST(DraftPrune, KeepsTheChainPrefixAndTheFirstNodesWithinItsDepth) {
  Draft d;
  NgramDrafter::merge_into({{5, 6, 7}, {5, 6, 8}, {9, 1}, {5, 2}}, d);
  Draft a = d;
  a.prune(2, 10);  // chain 5 6; 8 is at depth 3: dropped; 9, 1, 2 kept
  expect_well_formed(a);
  EXPECT_EQ(a.tokens, (std::vector<int>{5, 6, 9, 1, 2}));
  EXPECT_EQ(a.parent, (std::vector<int>{-1, 0, -1, 2, 0}));
  Draft b = d;
  b.prune(3, 1);  // one extra node: the first (8)
  EXPECT_EQ(b.tokens, (std::vector<int>{5, 6, 7, 8}));
  EXPECT_EQ(b.parent, (std::vector<int>{-1, 0, 1, 1}));
  Draft c = d;
  c.prune(3, 0);  // no extra node: a chain
  EXPECT_FALSE(c.is_tree());
  EXPECT_EQ(c.tokens, (std::vector<int>{5, 6, 7}));
  Draft e = d;
  e.prune(0, 5);  // nothing drafted
  EXPECT_TRUE(e.tokens.empty());
  EXPECT_FALSE(e.is_tree());
  // A node whose parent was dropped goes too: 1 under 9 without 9.
  Draft f = d;
  f.prune(3, 2);  // extras in order: 8, 9 (1 and 2 over the budget)
  EXPECT_EQ(f.tokens, (std::vector<int>{5, 6, 7, 8, 9}));
}

TEST(DraftPrune, ChainsAreCutLikeAResize) {
  Draft d;
  d.tokens = {4, 5, 6, 7};
  d.confidence = {0.9f, 0.8f, 0.7f, 0.6f};
  d.prune(2, 3);
  EXPECT_EQ(d.tokens, (std::vector<int>{4, 5}));
  EXPECT_EQ(d.confidence, (std::vector<float>{0.9f, 0.8f}));
  EXPECT_FALSE(d.is_tree());
}

TEST(ModelDrafterTree, SiblingsHangBesideTheChainInDepthOrder) {
  Draft d;
  d.tokens = {10, 11, 12};
  ModelDrafter::add_siblings({{0, 20}, {2, 22}}, d);
  expect_well_formed(d);
  EXPECT_EQ(d.tokens, (std::vector<int>{10, 11, 12, 20, 22}));
  EXPECT_EQ(d.parent, (std::vector<int>{-1, 0, 1, -1, 1}));
  EXPECT_EQ(d.chain_length(), 3);
}
