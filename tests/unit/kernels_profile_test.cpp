// The profiling kernels (`bench decode --profile`) against the kernels they
// wrap: bit-identical results, and every call counted where it belongs; and the
// thread pool's timing of its parallel regions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/profiling_kernels.h"
#include "support/random_weights.h"

using namespace tandem;

namespace {

// A Q8_0 matrix of the support library's, named as a model's tensor.
struct Weights {
  test::RandomMatrix m;
  TensorView view;
};

Weights q8_matrix(const std::string& name, int64_t K, int64_t N, uint32_t seed) {
  Weights w{test::random_matrix(DType::Q8_0, K, N, seed), {}};
  w.view = w.m.view();
  w.view.name = name;
  return w;
}

}  // namespace

TEST(ProfilingKernels, SameResultsAndEveryCallCounted) {
  ThreadPool pool(2);
  const kernels::KernelLimits limits{4, 256, 64, 4};
  kernels::KernelConfig plain_config, profiled_config;
  profiled_config.profile = true;
  auto plain = kernels::Kernels::create(plain_config, pool, limits);
  auto profiled = kernels::Kernels::create(profiled_config, pool, limits);
  ASSERT_EQ(plain->profile(), nullptr);
  ASSERT_NE(profiled->profile(), nullptr);
  EXPECT_STREQ(profiled->name(), plain->name());

  const Weights q = q8_matrix("blk.0.attn_q.weight", 256, 64, 1);
  const Weights k = q8_matrix("blk.0.attn_k.weight", 256, 32, 2);
  const Weights down = q8_matrix("blk.1.ffn_down.weight", 256, 96, 3);
  const std::vector<float> x = test::random_floats(3 * 256, 7), norm_w(256, 1.5f);

  auto run = [&](kernels::Kernels& kn) {
    std::vector<float> yq(3 * 64), yk(3 * 32), yd(3 * 96), normed(256);
    const TensorView* qk[] = {&q.view, &k.view};
    float* ys[] = {yq.data(), yk.data()};
    kn.matmul_multi(qk, 2, x.data(), 3, ys);
    kn.matmul(down.view, x.data(), 3, yd.data());
    kn.rmsnorm(x.data(), norm_w.data(), 256, 1e-6f, normed.data());
    std::vector<float> out = yq;
    out.insert(out.end(), yk.begin(), yk.end());
    out.insert(out.end(), yd.begin(), yd.end());
    out.insert(out.end(), normed.begin(), normed.end());
    return out;
  };
  const std::vector<float> expected = run(*plain), got = run(*profiled);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "value " << i;

  const kernels::KernelProfile& p = *profiled->profile();
  ASSERT_EQ(p.by_kind.count("matmul attn_q+attn_k"), 1u);
  ASSERT_EQ(p.by_kind.count("matmul ffn_down"), 1u);
  ASSERT_EQ(p.by_kind.count("rmsnorm"), 1u);
  EXPECT_EQ(p.by_kind.at("matmul attn_q+attn_k").calls, 1);
  EXPECT_EQ(p.by_kind.at("matmul attn_q+attn_k").weight_bytes,
            static_cast<double>(q.m.bytes.size() + k.m.bytes.size()));
  EXPECT_EQ(p.by_kind.at("matmul ffn_down").weight_bytes, static_cast<double>(down.m.bytes.size()));
  EXPECT_EQ(p.by_kind.at("rmsnorm").weight_bytes, 0);
  // Layer 0's Q/K, then layer 1's down projection and the norm after it.
  ASSERT_EQ(p.layer_ms.size(), 2u);
  EXPECT_NEAR(p.layer_ms[0], p.by_kind.at("matmul attn_q+attn_k").ms, 1e-9);
  EXPECT_NEAR(p.layer_ms[1], p.by_kind.at("matmul ffn_down").ms + p.by_kind.at("rmsnorm").ms, 1e-9);
  EXPECT_NEAR(p.total_ms(), p.layer_ms[0] + p.layer_ms[1], 1e-9);
}

// Regions are counted only while timing is on; the threads' busy time never
// exceeds the threads' share of the regions' wall time by more than clock
// granularity (a thread's job lies inside its region).
TEST(ThreadPoolTiming, CountsRegionsAndBusyTime) {
  ThreadPool pool(2);
  std::vector<double> v(1 << 16, 1.0);
  auto work = [&] {
    pool.parallel_for(static_cast<int64_t>(v.size()), [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) v[i] = v[i] * 1.0000001 + 1e-9;
    });
  };
  work();
  EXPECT_EQ(pool.timing().regions, 0);
  pool.set_timing(true);
  for (int i = 0; i < 10; ++i) work();
  pool.set_timing(false);
  work();
  const ThreadPool::Timing t = pool.timing();
  EXPECT_EQ(t.regions, 10);
  EXPECT_GT(t.busy_ms, 0);
  EXPECT_LE(t.busy_ms, pool.size() * t.region_ms + 0.01);
  pool.reset_timing();
  EXPECT_EQ(pool.timing().regions, 0);
  EXPECT_EQ(pool.timing().busy_ms, 0);
}
