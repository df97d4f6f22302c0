// The CUDA graph buckets (cuda/graph_buckets.h): which shapes are captured and
// which one a decode or verify step runs in. Host logic, exact answers.
#include <gtest/gtest.h>

#include <algorithm>

#include "cuda/graph_buckets.h"
#include "support/test_util.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

TEST(CudaGraphBuckets, SizesForTypicalLimits) {
  const GraphBuckets b({16, 64});
  EXPECT_EQ(b.batch_sizes(), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(b.token_counts(), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64}));
  EXPECT_EQ(b.all().size(), 5u * 14u);
  EXPECT_EQ(b.all().front(), (GraphBucket{1, 1}));
  EXPECT_EQ(b.all().back(), (GraphBucket{16, 64}));
}

TEST(CudaGraphBuckets, LimitsThatAreNotOnTheLadderAreBucketsOfTheirOwn) {
  const GraphBuckets b({12, 10});
  EXPECT_EQ(b.batch_sizes(), (std::vector<int>{1, 2, 4, 8, 12}));
  EXPECT_EQ(b.token_counts(), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 10}));
  const GraphBuckets one({1, 1});
  EXPECT_EQ(one.all(), (std::vector<GraphBucket>{{1, 1}}));
}

// Decode (1 position) and verify up to K = 7 never pad positions; batches pad
// to the next power of two.
TEST(CudaGraphBuckets, ChoosesTheSmallestBucketThatHoldsTheStep) {
  const GraphBuckets b({16, 64});
  EXPECT_EQ(b.choose(1, 1), (GraphBucket{1, 1}));
  EXPECT_EQ(b.choose(3, 1), (GraphBucket{4, 1}));
  EXPECT_EQ(b.choose(5, 6), (GraphBucket{8, 6}));
  EXPECT_EQ(b.choose(16, 9), (GraphBucket{16, 12}));
  EXPECT_EQ(b.choose(9, 33), (GraphBucket{16, 48}));
  EXPECT_EQ(b.choose(16, 64), (GraphBucket{16, 64}));
}

// Every step within the limits gets a bucket that holds it, is the smallest
// such, and wastes less than half of each dimension past the exact range.
TEST(CudaGraphBuckets, EveryStepFitsItsBucketTightly) {
  const GraphBuckets b({24, 40});
  for (int batch = 1; batch <= 24; ++batch) {
    for (int tokens = 1; tokens <= 40; ++tokens) {
      const GraphBucket g = b.choose(batch, tokens);
      ASSERT_GE(g.batch, batch);
      ASSERT_GE(g.tokens, tokens);
      ASSERT_LT(g.batch, 2 * batch);
      ASSERT_LE(2 * g.tokens, 3 * tokens);  // padding at most 1.5x
      if (tokens <= 8) {
        ASSERT_EQ(g.tokens, tokens);
      }
      const auto& bs = b.batch_sizes();
      const auto it = std::find(bs.begin(), bs.end(), g.batch);
      ASSERT_TRUE(it != bs.end());
      if (it != bs.begin()) {
        ASSERT_LT(*(it - 1), batch);  // no smaller bucket holds it
      }
    }
  }
}

TEST(CudaGraphBuckets, StepsOutsideTheLimitsAreRefused) {
  const GraphBuckets b({8, 8});
  EXPECT_NE(test::error_of([&] { b.choose(9, 1); }), "");
  EXPECT_NE(test::error_of([&] { b.choose(1, 9); }), "");
  EXPECT_NE(test::error_of([&] { b.choose(0, 1); }), "");
  EXPECT_NE(test::error_of([] { GraphBuckets({0, 4}); }), "");
}

}  // namespace
