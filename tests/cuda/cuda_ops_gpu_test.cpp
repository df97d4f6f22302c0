// The CUDA RMSNorm (alone and fused with the residual add), SwiGLU, add and
// RoPE against the scalar reference kernels, with tolerances from how far the
// two may differ in rounding; and the row operations' batch invariance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/cuda_kernels.h"
#include "cuda_test_util.h"
#include "kernels/ref/ref_kernels.h"
#include "support/random_weights.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

using CudaOps = test::CudaDeviceTest;

constexpr double kUlp = 0x1p-24;  // float's unit roundoff
constexpr int kRows = 5, kN = 1536;

std::vector<float> ref_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, int n,
                               float eps) {
  std::vector<float> out(x.size());
  for (size_t r = 0; r < x.size() / n; ++r)
    kernels::ref::rmsnorm(&x[r * n], w.data(), n, eps, &out[r * n]);
  return out;
}

// The sum of squares is added in another order (relative error below n ulps),
// then square-rooted and multiplied: (n + 8) ulps of each value.
void expect_norm_near(const std::vector<float>& got, const std::vector<float>& want, int n) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], (n + 8) * kUlp * std::fabs(want[i]) + 1e-30) << i;
}

TEST_F(CudaOps, RmsNormMatchesTheReference) {
  const std::vector<float> x = test::random_floats(kRows * kN, 1), w = test::random_floats(kN, 2);
  DeviceBuffer dx = test::to_device(x), dw = test::to_device(w), dout(x.size() * sizeof(float));
  rmsnorm(dx.as<float>(), dw.as<float>(), kRows, kN, 1e-6f, dout.as<float>(), nullptr);
  expect_norm_near(test::from_device<float>(dout, x.size()), ref_rmsnorm(x, w, kN, 1e-6f), kN);
}

TEST_F(CudaOps, AddRmsNormUpdatesTheResidualAndNormsIt) {
  std::vector<float> x = test::random_floats(kRows * kN, 3);
  const std::vector<float> delta = test::random_floats(kRows * kN, 4),
                           w = test::random_floats(kN, 5);
  DeviceBuffer dx = test::to_device(x), dd = test::to_device(delta), dw = test::to_device(w);
  DeviceBuffer dout(x.size() * sizeof(float));
  add_rmsnorm(dx.as<float>(), dd.as<float>(), dw.as<float>(), kRows, kN, 1e-5f, dout.as<float>(),
              nullptr);
  for (size_t i = 0; i < x.size(); ++i) x[i] += delta[i];  // one rounding: exact on both sides
  EXPECT_EQ(test::from_device<float>(dx, x.size()), x);
  expect_norm_near(test::from_device<float>(dout, x.size()), ref_rmsnorm(x, w, kN, 1e-5f), kN);
}

// A row's norm is the same bits alone and among others.
TEST_F(CudaOps, RmsNormRowsAreBatchInvariant) {
  const std::vector<float> x = test::random_floats(kRows * kN, 6), w = test::random_floats(kN, 7);
  DeviceBuffer dx = test::to_device(x), dw = test::to_device(w), dout(x.size() * sizeof(float));
  rmsnorm(dx.as<float>(), dw.as<float>(), kRows, kN, 1e-6f, dout.as<float>(), nullptr);
  const std::vector<float> all = test::from_device<float>(dout, x.size());
  for (int r = 0; r < kRows; ++r) {
    rmsnorm(dx.as<float>() + r * kN, dw.as<float>(), 1, kN, 1e-6f, dout.as<float>(), nullptr);
    const std::vector<float> one = test::from_device<float>(dout, kN);
    EXPECT_EQ(std::memcmp(one.data(), &all[r * kN], kN * sizeof(float)), 0) << r;
  }
}

// silu(g) * u: the device's expf is within 2 ulps of the host's and the rest is
// the same three roundings, so 8 ulps of the value.
TEST_F(CudaOps, SwigluMatchesTheReference) {
  const int64_t n = 8960;
  const std::vector<float> g = test::random_floats(n, 8, 4.0f), u = test::random_floats(n, 9);
  DeviceBuffer dg = test::to_device(g), du = test::to_device(u), dout(n * sizeof(float));
  swiglu(dg.as<float>(), du.as<float>(), n, dout.as<float>(), nullptr);
  std::vector<float> want(n);
  kernels::ref::swiglu(g.data(), u.data(), static_cast<int>(n), want.data());
  const std::vector<float> got = test::from_device<float>(dout, n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(got[i], want[i], 8 * kUlp * std::fabs(want[i]) + 1e-30);
}

// One rounded addition on both sides: exact.
TEST_F(CudaOps, AddInplaceIsExact) {
  const int64_t n = 1000;
  std::vector<float> x = test::random_floats(n, 10);
  const std::vector<float> b = test::random_floats(n, 11);
  DeviceBuffer dx = test::to_device(x), db = test::to_device(b);
  add_inplace(dx.as<float>(), db.as<float>(), n, nullptr);
  kernels::ref::add_inplace(x.data(), b.data(), static_cast<int>(n));
  EXPECT_EQ(test::from_device<float>(dx, n), x);
}

// Each output is x0 c - x1 s (or x0 s + x1 c): two products and a sum, rounded
// as on the host unless the host fused one (then within 2 ulps of the terms).
class CudaRope : public test::CudaDeviceTestWithParam<kernels::RopeStyle> {};

TEST_P(CudaRope, MatchesTheReferenceForEveryRow) {
  const int rows = 3, heads = 4, hd = 64, half = hd / 2;
  const int64_t stride = heads * hd + 32;  // rows of a wider buffer (q beside k and v)
  std::vector<float> x = test::random_floats(rows * stride, 12);
  std::vector<float> cos(rows * half), sin(rows * half), inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / hd);
  for (int r = 0; r < rows; ++r)
    kernels::rope_angles(100 * r + 7, inv_freq.data(), half, &cos[r * half], &sin[r * half]);
  DeviceBuffer dx = test::to_device(x), dc = test::to_device(cos), ds = test::to_device(sin);
  rope(dx.as<float>(), rows, stride, heads, hd, dc.as<float>(), ds.as<float>(), GetParam(),
       nullptr);
  const std::vector<float> got = test::from_device<float>(dx, x.size());
  std::vector<float> want = x;
  for (int r = 0; r < rows; ++r)
    kernels::ref::rope(&want[r * stride], heads, hd, &cos[r * half], &sin[r * half], GetParam());
  for (size_t i = 0; i < x.size(); ++i) {
    const double scale = std::fabs(x[i]) + 8.0;  // |x0| + |x1| <= this for N(0,1) data
    ASSERT_NEAR(got[i], want[i], 4 * kUlp * scale) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(BothStyles, CudaRope,
                         ::testing::Values(kernels::RopeStyle::Normal, kernels::RopeStyle::NeoX),
                         [](const auto& info) {
                           return info.param == kernels::RopeStyle::NeoX ? "NeoX" : "Normal";
                         });

}  // namespace
