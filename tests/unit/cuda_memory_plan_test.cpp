// The CUDA backend's device memory plan (cuda/memory_plan.h): regions in order,
// aligned and disjoint, inside the budget, with as many KV blocks as fit and
// not one more; and the plans that cannot work refused. Exact arithmetic.
#include <gtest/gtest.h>

#include "cuda/attention_plan.h"
#include "cuda/memory_plan.h"
#include "support/test_util.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

constexpr size_t kMiB = size_t{1} << 20, kGiB = size_t{1} << 30;

// Qwen2.5-1.5B's shape on an 80 GB device.
MemoryPlanRequest qwen_1_5b() {
  MemoryPlanRequest r;
  r.device_bytes = 79 * kGiB;
  r.reserve_bytes = kGiB;
  r.weight_bytes = 980 * kMiB;
  r.dims = {28, 1536, 12, 2, 128, 8960, 151936};
  r.kv_type = DType::F16;
  r.kv_block_size = 16;
  r.max_rows = 64;
  r.max_context = 32768;
  r.input_bytes = 300000;
  return r;
}

TEST(CudaMemoryPlan, RegionsAreOrderedAlignedAndWithinTheBudget) {
  const MemoryPlanRequest r = qwen_1_5b();
  const MemoryPlan p = plan_device_memory(r);
  const MemoryRegion regions[] = {p.weights, p.activations, p.attention_scratch, p.inputs,
                                  p.kv_cache};
  size_t end = 0;
  for (const MemoryRegion& m : regions) {
    EXPECT_EQ(m.offset % kRegionAlign, 0u);
    EXPECT_GE(m.offset, end);  // disjoint, in order
    end = m.end();
  }
  EXPECT_EQ(p.total_bytes, p.kv_cache.end());
  EXPECT_LE(p.total_bytes, r.device_bytes - r.reserve_bytes);
  EXPECT_GE(p.weights.bytes, r.weight_bytes);
  EXPECT_GE(p.activations.bytes, sizeof(float) * 64 * activation_floats_per_row(r.dims));
  EXPECT_GE(p.attention_scratch.bytes,
            sizeof(float) * attention_scratch_floats(64, 12, 128, 32768));
  EXPECT_GE(p.inputs.bytes, r.input_bytes);
}

TEST(CudaMemoryPlan, KvBlocksFillTheRestAndNotOneMore) {
  const MemoryPlanRequest r = qwen_1_5b();
  const MemoryPlan p = plan_device_memory(r);
  // K and V, 28 layers, 16 positions, 2 heads x 128, 2 bytes.
  EXPECT_EQ(p.kv_block_bytes, size_t{2 * 28 * 16 * 2 * 128 * 2});
  EXPECT_EQ(p.kv_cache.bytes, p.kv_blocks * p.kv_block_bytes);
  EXPECT_GT(p.total_bytes + p.kv_block_bytes, r.device_bytes - r.reserve_bytes);
  // The rest of the 78 GiB usable after 1.1 GB of weights and buffers, in 448 KiB blocks.
  EXPECT_EQ(p.kv_blocks, static_cast<int>((r.device_bytes - r.reserve_bytes - p.kv_cache.offset) /
                                          p.kv_block_bytes));
  EXPECT_GT(p.kv_blocks, 175000);
}

TEST(CudaMemoryPlan, F32CacheBlocksAreTwiceTheSize) {
  MemoryPlanRequest r = qwen_1_5b();
  const size_t f16 = plan_device_memory(r).kv_block_bytes;
  r.kv_type = DType::F32;
  EXPECT_EQ(plan_device_memory(r).kv_block_bytes, 2 * f16);
}

TEST(CudaMemoryPlan, ActivationsGrowWithTheRowsOfThePass) {
  MemoryPlanRequest r = qwen_1_5b();
  r.max_rows = 1;
  const MemoryPlan one = plan_device_memory(r);
  r.max_rows = 8;
  const MemoryPlan eight = plan_device_memory(r);
  EXPECT_GT(eight.activations.bytes, 7 * one.activations.bytes);
  EXPECT_LE(eight.activations.bytes, 8 * one.activations.bytes);
  EXPECT_LE(eight.kv_blocks, one.kv_blocks);
}

TEST(CudaMemoryPlan, PlansThatCannotWorkAreRefused) {
  MemoryPlanRequest r = qwen_1_5b();
  r.device_bytes = 1 * kGiB;  // all of it the reserve
  EXPECT_NE(test::error_of([&] { plan_device_memory(r); }).find("exceed"), std::string::npos);
  r = qwen_1_5b();
  r.device_bytes = 2 * kGiB + 100 * kMiB;  // the weights fit, one 32K sequence does not
  EXPECT_NE(test::error_of([&] { plan_device_memory(r); }).find("KV blocks"), std::string::npos);
  r = qwen_1_5b();
  r.kv_type = DType::Q8_0;
  EXPECT_NE(test::error_of([&] { plan_device_memory(r); }), "");
  r = qwen_1_5b();
  r.dims.n_layers = 0;
  EXPECT_NE(test::error_of([&] { plan_device_memory(r); }), "");
}

// A small device: exactly one full-context sequence's blocks is accepted.
TEST(CudaMemoryPlan, TheSmallestWorkingBudgetHoldsOneSequence) {
  MemoryPlanRequest r = qwen_1_5b();
  r.max_context = 4096;
  r.reserve_bytes = 0;
  r.device_bytes = 100 * kGiB;
  const MemoryPlan big = plan_device_memory(r);
  const int needed = 4096 / 16;
  r.device_bytes = big.kv_cache.offset + needed * big.kv_block_bytes;
  const MemoryPlan tight = plan_device_memory(r);
  EXPECT_EQ(tight.kv_blocks, needed);
  r.device_bytes -= 1;
  EXPECT_NE(test::error_of([&] { plan_device_memory(r); }), "");
}

}  // namespace
