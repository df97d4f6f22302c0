// The device argmax, softmax and top-k against host computations: argmax and
// top-k exactly (they only compare), softmax within the rounding of its sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cuda/cuda_kernels.h"
#include "cuda_test_util.h"
#include "kernels/ref/ref_kernels.h"
#include "support/random_weights.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

using CudaSampling = test::CudaDeviceTest;

constexpr int kVocab = 151936;  // Qwen2.5's: not a multiple of the block's 256 threads

TEST_F(CudaSampling, ArgmaxEqualsTheCpusIncludingTiesAndNaN) {
  const int rows = 4;
  std::vector<float> x = test::random_floats(int64_t{rows} * kVocab, 1);
  x[1 * kVocab + 500] = 9.0f;  // row 1: a tie, the first index wins
  x[1 * kVocab + 90000] = 9.0f;
  x[2 * kVocab + 77] = NAN;                               // row 2: NaN gives -1
  std::fill(x.begin() + 3 * kVocab, x.end(), -INFINITY);  // row 3: all -inf gives 0
  DeviceBuffer dx = test::to_device(x), dout(rows * sizeof(int));
  argmax_rows(dx.as<float>(), rows, kVocab, dout.as<int>(), nullptr);
  const std::vector<int> got = test::from_device<int>(dout, rows);
  for (int r = 0; r < rows; ++r)
    EXPECT_EQ(got[r], kernels::ref::argmax(&x[r * kVocab], kVocab)) << r;
  EXPECT_EQ(got[1], 500);
  EXPECT_EQ(got[2], -1);
  EXPECT_EQ(got[3], 0);
}

// Against a double-precision softmax: the device's expf (2 ulps) and its sum in
// another order (n ulps of the sum at worst) bound the error at (n + 16) ulps.
TEST_F(CudaSampling, SoftmaxMatchesDoublePrecision) {
  const int rows = 2, n = 5000;
  const std::vector<float> x = test::random_floats(rows * n, 2, 3.0f);
  DeviceBuffer dx = test::to_device(x), dout(x.size() * sizeof(float));
  softmax_rows(dx.as<float>(), rows, n, dout.as<float>(), nullptr);
  const std::vector<float> got = test::from_device<float>(dout, x.size());
  for (int r = 0; r < rows; ++r) {
    const float* xr = &x[r * n];
    const double mx = *std::max_element(xr, xr + n);
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += std::exp(xr[i] - mx);
    for (int i = 0; i < n; ++i) {
      const double want = std::exp(xr[i] - mx) / sum;
      ASSERT_NEAR(got[r * n + i], want, (n + 16) * 0x1p-24 * want) << r << " " << i;
    }
  }
}

// Largest first, ties by the lower index, NaN skipped: std::partial_sort with
// the same order picks the same indices and values.
TEST_F(CudaSampling, TopKEqualsASortedSelection) {
  const int rows = 3, k = 40;
  std::vector<float> x = test::random_floats(int64_t{rows} * kVocab, 3);
  for (int i = 0; i < 10; ++i) x[kVocab + 1000 * i] = 5.0f;  // row 1: ties across the top
  x[2 * kVocab + 3] = NAN;
  x[2 * kVocab + 4] = 100.0f;
  DeviceBuffer dx = test::to_device(x), di(rows * k * sizeof(int)), dv(rows * k * sizeof(float));
  topk_rows(dx.as<float>(), rows, kVocab, k, di.as<int>(), dv.as<float>(), nullptr);
  const std::vector<int> idx = test::from_device<int>(di, rows * k);
  const std::vector<float> val = test::from_device<float>(dv, rows * k);
  for (int r = 0; r < rows; ++r) {
    const float* xr = &x[r * kVocab];
    std::vector<int> order;
    for (int i = 0; i < kVocab; ++i)
      if (!std::isnan(xr[i])) order.push_back(i);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return xr[a] > xr[b] || (xr[a] == xr[b] && a < b); });
    for (int j = 0; j < k; ++j) {
      ASSERT_EQ(idx[r * k + j], order[j]) << r << " " << j;
      ASSERT_EQ(val[r * k + j], xr[order[j]]);
    }
  }
  EXPECT_EQ(idx[2 * k], 4);
}

TEST_F(CudaSampling, TopKRefusesKBeyondItsLimit) {
  DeviceBuffer dx(100 * sizeof(float)), di(100 * sizeof(int)), dv(100 * sizeof(float));
  EXPECT_THROW(
      topk_rows(dx.as<float>(), 1, 100, kMaxTopK + 1, di.as<int>(), dv.as<float>(), nullptr),
      std::exception);
  EXPECT_THROW(topk_rows(dx.as<float>(), 1, 10, 11, di.as<int>(), dv.as<float>(), nullptr),
               std::exception);
}

}  // namespace
