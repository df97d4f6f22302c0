// The CUDA gemm against the scalar reference matmul, for every weight type and
// row counts from the decode GEMV (M = 1) to a 64-row prefill chunk; and its
// batch invariance: each row's result bit-identical whatever M.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "cuda/cuda_kernels.h"
#include "cuda_test_util.h"
#include "kernels/ref/ref_kernels.h"
#include "support/random_weights.h"

using namespace tandem;
using namespace tandem::cuda;
using test::CudaDeviceTestWithParam;

namespace {

const DType kLoadedTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                              DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
constexpr int64_t kK = 768,
                  kN = 67;  // 3 K-quant super-blocks; N not a multiple of a block's 4 columns

std::vector<float> gpu_gemm(const DeviceMatrix& W, const std::vector<float>& x, int M) {
  DeviceBuffer dx = test::to_device(x), dy(sizeof(float) * M * W.layout.n);
  gemm(W, dx.as<float>(), M, dy.as<float>(), W.layout.n, nullptr);
  return test::from_device<float>(dy, static_cast<size_t>(M) * W.layout.n);
}

class CudaGemm : public CudaDeviceTestWithParam<DType> {
 protected:
  void SetUp() override {
    CudaDeviceTestWithParam<DType>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    m_ = test::random_matrix(GetParam(), kK, kN, 5);
    W_ = upload_matrix(plan_weight_layout(GetParam(), kK, kN), m_.bytes.data(), buffer_);
  }
  test::RandomMatrix m_;
  DeviceBuffer buffer_;
  DeviceMatrix W_;
};

// The device decodes each weight to the reference's bits (cuda_weight_layout_test)
// and only the order of the K additions differs, so |gpu - ref| is bounded by the
// two sums' worst-case rounding: 2 K 2^-24 sum_k |w_k x_k|.
TEST_P(CudaGemm, MatchesTheReference) {
  ThreadPool pool(1);
  for (int M : {1, 2, 3, 5, 8, 13, 64}) {
    SCOPED_TRACE(M);
    const std::vector<float> x = test::random_floats(M * kK, 100 + M);
    std::vector<float> want(static_cast<size_t>(M) * kN);
    kernels::ref::matmul(m_.view(), x.data(), M, want.data(), pool);
    const std::vector<float> got = gpu_gemm(W_, x, M);
    for (int r = 0; r < M; ++r) {
      for (int64_t n = 0; n < kN; ++n) {
        double magnitude = 0;
        for (int64_t k = 0; k < kK; ++k) magnitude += std::fabs(m_.deq[n * kK + k] * x[r * kK + k]);
        const double tol = 2.0 * kK * std::ldexp(1.0, -24) * magnitude;
        ASSERT_NEAR(got[r * kN + n], want[r * kN + n], tol) << "row " << r << " column " << n;
      }
    }
  }
}

// Row r of a call with M rows equals the M = 1 call on row r alone, bit for bit:
// decode (M = 1), verify with K = 4 (M = 5), a partial tile (M = 13), a full chunk.
TEST_P(CudaGemm, RowsAreBitIdenticalWhateverM) {
  const std::vector<float> x = test::random_floats(64 * kK, 9);
  std::vector<float> alone(64 * kN);
  for (int r = 0; r < 64; ++r) {
    const std::vector<float> row(x.begin() + r * kK, x.begin() + (r + 1) * kK);
    const std::vector<float> y = gpu_gemm(W_, row, 1);
    std::copy(y.begin(), y.end(), alone.begin() + r * kN);
  }
  for (int M : {2, 5, 13, 64}) {
    const std::vector<float> batch(x.begin(), x.begin() + M * kK);
    const std::vector<float> y = gpu_gemm(W_, batch, M);
    EXPECT_EQ(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)), 0) << "M = " << M;
  }
}

// Row m of y at y + m * ldy: columns of a wider matrix, the rest untouched.
TEST_P(CudaGemm, WritesStridedRows) {
  const int M = 3;
  const int64_t ldy = kN + 5;
  const std::vector<float> x = test::random_floats(M * kK, 2);
  const std::vector<float> dense = gpu_gemm(W_, x, M);
  DeviceBuffer dx = test::to_device(x);
  DeviceBuffer dy = test::to_device(std::vector<float>(M * ldy, -7.0f));
  gemm(W_, dx.as<float>(), M, dy.as<float>(), ldy, nullptr);
  const std::vector<float> y = test::from_device<float>(dy, M * ldy);
  for (int r = 0; r < M; ++r) {
    EXPECT_EQ(std::memcmp(&y[r * ldy], &dense[r * kN], kN * sizeof(float)), 0);
    for (int64_t c = kN; c < ldy; ++c) EXPECT_EQ(y[r * ldy + c], -7.0f);
  }
}

// The fused launches (gemm_fused.cu) give gemm's bits: gemm_pairs for every M
// (N = 67: the last pair has one column) into strided rows; gate_up_swiglu the
// bits of two gemms and swiglu; with this type as gate and Q6_K as up, so that
// one launch decodes two types.
TEST_P(CudaGemm, FusedLaunchesGiveGemmsBits) {
  const test::RandomMatrix up = test::random_matrix(DType::Q6_K, kK, kN, 6);
  DeviceBuffer up_buffer;
  const DeviceMatrix U =
      upload_matrix(plan_weight_layout(DType::Q6_K, kK, kN), up.bytes.data(), up_buffer);
  for (int M : {1, 2, 3, 5, 8, 13, 64, 70}) {
    SCOPED_TRACE(M);
    const std::vector<float> x = test::random_floats(M * kK, 300 + M);
    DeviceBuffer dx = test::to_device(x);
    std::vector<float> want(size_t(M) * kN);
    for (int m = 0; m < M; m += kMaxGemmRows) {  // gemm takes at most 64 rows a call
      const int rows = std::min(kMaxGemmRows, M - m);
      const std::vector<float> part(x.begin() + m * kK, x.begin() + (m + rows) * kK);
      const std::vector<float> y = gpu_gemm(W_, part, rows);
      std::copy(y.begin(), y.end(), want.begin() + m * kN);
    }
    const int64_t ldy = kN + 3;
    DeviceBuffer dy = test::to_device(std::vector<float>(M * ldy, -7.0f));
    gemm_pairs(W_, dx.as<float>(), M, dy.as<float>(), ldy, nullptr);
    const std::vector<float> y = test::from_device<float>(dy, M * ldy);
    for (int r = 0; r < M; ++r) {
      ASSERT_EQ(std::memcmp(&y[r * ldy], &want[r * kN], kN * sizeof(float)), 0) << "row " << r;
      for (int64_t c = kN; c < ldy; ++c) ASSERT_EQ(y[r * ldy + c], -7.0f);
    }

    if (M > kMaxGemmRows) continue;
    DeviceBuffer dg(sizeof(float) * M * kN), du(sizeof(float) * M * kN), dh(sizeof(float) * M * kN),
        dfused(sizeof(float) * M * kN);
    gemm(W_, dx.as<float>(), M, dg.as<float>(), kN, nullptr);
    gemm(U, dx.as<float>(), M, du.as<float>(), kN, nullptr);
    swiglu(dg.as<float>(), du.as<float>(), int64_t{M} * kN, dh.as<float>(), nullptr);
    gate_up_swiglu(W_, U, dx.as<float>(), M, dfused.as<float>(), nullptr);
    const std::vector<float> h = test::from_device<float>(dh, M * kN);
    const std::vector<float> fused = test::from_device<float>(dfused, M * kN);
    ASSERT_EQ(std::memcmp(h.data(), fused.data(), h.size() * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLoadedType, CudaGemm, ::testing::ValuesIn(kLoadedTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
