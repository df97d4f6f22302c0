// The CUDA gemm against the scalar reference matmul, for every weight type and
// row counts from the decode GEMV (M = 1) to a 64-row prefill chunk; and its
// batch invariance: each row's result bit-identical whatever M. Under both
// mappings (cuda_kernels.h: GemvMapping): Groups at K = 768, as first run on the
// H100 (the test names without a suffix), and Lanes at K = 768 (teams of 32,
// one partial pass of the 4-bit chunks) and K = 1536 (teams of 16, the 1.5B
// model's d_model); the two mappings agree within rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
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
constexpr int64_t kN = 67;  // N not a multiple of a block's 4 columns (or 8 teams of 16)

struct GemmCase {
  DType type;
  GemvMapping mapping;
  int64_t k;  // 768: 3 K-quant super-blocks
};
std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> cases;
  for (DType t : kLoadedTypes) {
    cases.push_back({t, GemvMapping::Groups, 768});
    cases.push_back({t, GemvMapping::Lanes, 768});
    cases.push_back({t, GemvMapping::Lanes, 1536});
  }
  return cases;
}
std::string case_name(const ::testing::TestParamInfo<GemmCase>& info) {
  const GemmCase& c = info.param;
  std::string name(dtype_name(c.type));
  if (c.mapping == GemvMapping::Lanes) name += "_lanes";
  if (c.k != 768) name += "_k" + std::to_string(c.k);
  return name;
}
GemvMapping other(GemvMapping g) {
  return g == GemvMapping::Lanes ? GemvMapping::Groups : GemvMapping::Lanes;
}

std::vector<float> gpu_gemm(const DeviceMatrix& W, const std::vector<float>& x, int M,
                            GemvMapping mapping) {
  DeviceBuffer dx = test::to_device(x), dy(sizeof(float) * M * W.layout.n);
  gemm(W, dx.as<float>(), M, dy.as<float>(), W.layout.n, nullptr, mapping);
  return test::from_device<float>(dy, static_cast<size_t>(M) * W.layout.n);
}

class CudaGemm : public CudaDeviceTestWithParam<GemmCase> {
 protected:
  void SetUp() override {
    CudaDeviceTestWithParam<GemmCase>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    k_ = GetParam().k;
    g_ = GetParam().mapping;
    m_ = test::random_matrix(GetParam().type, k_, kN, 5);
    W_ = upload_matrix(plan_weight_layout(GetParam().type, k_, kN), m_.bytes.data(), buffer_);
  }
  std::vector<float> gpu_gemm(const std::vector<float>& x, int M) const {
    return ::gpu_gemm(W_, x, M, g_);
  }
  // The worst case of two float sums of the K products of row r and column n in
  // different orders: 2 K 2^-24 sum_k |w_k x_k|.
  double sum_tolerance(const std::vector<float>& x, int r, int64_t n) const {
    double magnitude = 0;
    for (int64_t k = 0; k < k_; ++k) magnitude += std::fabs(m_.deq[n * k_ + k] * x[r * k_ + k]);
    return 2.0 * k_ * std::ldexp(1.0, -24) * magnitude;
  }
  int64_t k_ = 0;  // the row length
  GemvMapping g_ = GemvMapping::Groups;
  test::RandomMatrix m_;
  DeviceBuffer buffer_;
  DeviceMatrix W_;
};

// The device decodes each weight to the reference's bits (cuda_weight_layout_test,
// cuda_chunk_decode_test) and only the order of the K additions differs, so |gpu - ref| is bounded
// by the two sums' worst-case rounding: 2 K 2^-24 sum_k |w_k x_k|.
TEST_P(CudaGemm, MatchesTheReference) {
  ThreadPool pool(1);
  for (int M : {1, 2, 3, 5, 8, 13, 64}) {
    SCOPED_TRACE(M);
    const std::vector<float> x = test::random_floats(M * k_, 100 + M);
    std::vector<float> want(static_cast<size_t>(M) * kN);
    kernels::ref::matmul(m_.view(), x.data(), M, want.data(), pool);
    const std::vector<float> got = gpu_gemm(x, M);
    for (int r = 0; r < M; ++r) {
      for (int64_t n = 0; n < kN; ++n) {
        ASSERT_NEAR(got[r * kN + n], want[r * kN + n], sum_tolerance(x, r, n))
            << "row " << r << " column " << n;
      }
    }
  }
}

// The other mapping's gemm: both multiply the same decoded weights (each
// decoder gives the reference's bits) by the same activations and only add the
// K products in another order (fmaf chains per lane, then a butterfly), each
// within K 2^-24 sum |w x| of the exact sum: so within twice that of each other.
TEST_P(CudaGemm, MappingsAgreeWithinRounding) {
  for (int M : {1, 5, 64}) {
    SCOPED_TRACE(M);
    const std::vector<float> x = test::random_floats(M * k_, 200 + M);
    const std::vector<float> got = gpu_gemm(x, M);
    const std::vector<float> theirs = ::gpu_gemm(W_, x, M, other(g_));
    for (int r = 0; r < M; ++r) {
      for (int64_t n = 0; n < kN; ++n) {
        ASSERT_NEAR(got[r * kN + n], theirs[r * kN + n], sum_tolerance(x, r, n))
            << "row " << r << " column " << n;
      }
    }
  }
}

// Row r of a call with M rows equals the M = 1 call on row r alone, bit for bit:
// decode (M = 1), verify with K = 4 (M = 5), a partial tile (M = 13), a full chunk.
TEST_P(CudaGemm, RowsAreBitIdenticalWhateverM) {
  const std::vector<float> x = test::random_floats(64 * k_, 9);
  std::vector<float> alone(64 * kN);
  for (int r = 0; r < 64; ++r) {
    const std::vector<float> row(x.begin() + r * k_, x.begin() + (r + 1) * k_);
    const std::vector<float> y = gpu_gemm(row, 1);
    std::copy(y.begin(), y.end(), alone.begin() + r * kN);
  }
  for (int M : {2, 5, 13, 64}) {
    const std::vector<float> batch(x.begin(), x.begin() + M * k_);
    const std::vector<float> y = gpu_gemm(batch, M);
    EXPECT_EQ(std::memcmp(y.data(), alone.data(), y.size() * sizeof(float)), 0) << "M = " << M;
  }
}

// Row m of y at y + m * ldy: columns of a wider matrix, the rest untouched.
TEST_P(CudaGemm, WritesStridedRows) {
  const int M = 3;
  const int64_t ldy = kN + 5;
  const std::vector<float> x = test::random_floats(M * k_, 2);
  const std::vector<float> dense = gpu_gemm(x, M);
  DeviceBuffer dx = test::to_device(x);
  DeviceBuffer dy = test::to_device(std::vector<float>(M * ldy, -7.0f));
  gemm(W_, dx.as<float>(), M, dy.as<float>(), ldy, nullptr, g_);
  const std::vector<float> y = test::from_device<float>(dy, M * ldy);
  for (int r = 0; r < M; ++r) {
    EXPECT_EQ(std::memcmp(&y[r * ldy], &dense[r * kN], kN * sizeof(float)), 0);
    for (int64_t c = kN; c < ldy; ++c) EXPECT_EQ(y[r * ldy + c], -7.0f);
  }
}

// The fused launches (gemm_fused.cu) give gemm's bits, under the same mapping:
// gemm_pairs for every M (N = 67: the last pair has one column) into strided
// rows; gate_up_swiglu the bits of two gemms and swiglu; with this type as gate
// and Q6_K as up, so that one launch decodes two types (under Lanes, two chunk
// maps: each column loads its own activations).
TEST_P(CudaGemm, FusedLaunchesGiveGemmsBits) {
  const test::RandomMatrix up = test::random_matrix(DType::Q6_K, k_, kN, 6);
  DeviceBuffer up_buffer;
  const DeviceMatrix U =
      upload_matrix(plan_weight_layout(DType::Q6_K, k_, kN), up.bytes.data(), up_buffer);
  for (int M : {1, 2, 3, 5, 8, 13, 64, 70}) {
    SCOPED_TRACE(M);
    const std::vector<float> x = test::random_floats(M * k_, 300 + M);
    DeviceBuffer dx = test::to_device(x);
    std::vector<float> want(size_t(M) * kN);
    for (int m = 0; m < M; m += kMaxGemmRows) {  // gemm takes at most 64 rows a call
      const int rows = std::min(kMaxGemmRows, M - m);
      const std::vector<float> part(x.begin() + m * k_, x.begin() + (m + rows) * k_);
      const std::vector<float> y = gpu_gemm(part, rows);
      std::copy(y.begin(), y.end(), want.begin() + m * kN);
    }
    const int64_t ldy = kN + 3;
    DeviceBuffer dy = test::to_device(std::vector<float>(M * ldy, -7.0f));
    gemm_pairs(W_, dx.as<float>(), M, dy.as<float>(), ldy, nullptr, g_);
    const std::vector<float> y = test::from_device<float>(dy, M * ldy);
    for (int r = 0; r < M; ++r) {
      ASSERT_EQ(std::memcmp(&y[r * ldy], &want[r * kN], kN * sizeof(float)), 0) << "row " << r;
      for (int64_t c = kN; c < ldy; ++c) ASSERT_EQ(y[r * ldy + c], -7.0f);
    }

    if (M > kMaxGemmRows) continue;
    DeviceBuffer dg(sizeof(float) * M * kN), du(sizeof(float) * M * kN), dh(sizeof(float) * M * kN),
        dfused(sizeof(float) * M * kN);
    gemm(W_, dx.as<float>(), M, dg.as<float>(), kN, nullptr, g_);
    gemm(U, dx.as<float>(), M, du.as<float>(), kN, nullptr, g_);
    swiglu(dg.as<float>(), du.as<float>(), int64_t{M} * kN, dh.as<float>(), nullptr);
    gate_up_swiglu(W_, U, dx.as<float>(), M, dfused.as<float>(), nullptr, g_);
    const std::vector<float> h = test::from_device<float>(dh, M * kN);
    const std::vector<float> fused = test::from_device<float>(dfused, M * kN);
    ASSERT_EQ(std::memcmp(h.data(), fused.data(), h.size() * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLoadedType, CudaGemm, ::testing::ValuesIn(gemm_cases()), case_name);

}  // namespace
