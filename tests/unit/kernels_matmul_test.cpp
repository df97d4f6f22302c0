// The SIMD matmul against the scalar reference (within a derived tolerance) and
// its batch invariance (bit-exact whatever the number of rows, their company,
// the thread count, or whether matrices share a matmul_multi call), for every
// weight type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/kernels.h"
#include "kernels/quants.h"
#include "kernels/ref/ref_kernels.h"

using namespace tandem;

namespace {

struct Matrix {
  TensorView view;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // the weights as the reference sees them
};

Matrix random_matrix(DType t, int64_t K, int64_t N, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(K * N));
  for (auto& v : w) v = dist(rng);
  Matrix m;
  const size_t row_bytes = dtype_row_bytes(t, K);
  m.bytes.resize(row_bytes * N);
  m.deq.resize(w.size());
  for (int64_t n = 0; n < N; ++n) {
    quantize_row(t, &w[n * K], m.bytes.data() + n * row_bytes, K);
    dequantize_row(t, m.bytes.data() + n * row_bytes, &m.deq[n * K], K);
  }
  m.view.name = "w";
  m.view.type = t;
  m.view.shape = {K, N};
  m.view.data = m.bytes.data();
  m.view.nbytes = m.bytes.size();
  return m;
}

std::vector<float> random_rows(int M, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(M * K));
  for (auto& v : x) v = dist(rng);
  // One row with a large outlier and one all-zero block: quantization edge cases.
  x[3] = 40.0f;
  if (M > 2)
    for (int k = 0; k < 32; ++k) x[2 * K + k] = 0.0f;
  return x;
}

bool is_k_quant(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K ||
         t == DType::Q6_K;
}
bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Largest error the fast kernel may show against the reference for output (m, n).
// Activations are quantized to 8 bits per block of B elements (32 for the legacy
// types, 256 for the K-quants) with scale d_b = max|x| / 127 and round-to-nearest,
// so each x_k moves by at most d_b / 2 and the dot product by at most
// sum_k |w_k| d_b(k) / 2. Both kernels also round in float: summing K products
// in any order errs by at most about K * 2^-24 * sum |w_k x_k|; we allow twice that.
// Float weight types take no activation quantization, only the rounding term.
float tolerance(DType t, const float* w, const float* x, int64_t K) {
  const int B = is_k_quant(t) ? 256 : 32;
  double quant = 0.0, mag = 0.0;
  for (int64_t b = 0; b < K; b += B) {
    float amax = 0.0f;
    for (int64_t k = b; k < b + B && k < K; ++k) amax = std::max(amax, std::fabs(x[k]));
    for (int64_t k = b; k < b + B && k < K; ++k) {
      quant += std::fabs(w[k]) * amax / 127.0 / 2.0;
      mag += std::fabs(w[k] * x[k]);
    }
  }
  const double rounding = 2.0 * K * std::ldexp(1.0, -24) * (mag + quant);
  return static_cast<float>((is_float(t) ? 0.0 : quant) + rounding + 1e-6);
}

class MatmulTypes : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTypes, MatchesReferenceWithinDerivedBound) {
  const DType t = GetParam();
  for (int64_t K : {int64_t{512}, int64_t{96}}) {
    if (is_k_quant(t) && K % 256 != 0) continue;
    const int64_t N = 37;
    const int M = 7;
    auto W = random_matrix(t, K, N, 11);
    auto x = random_rows(M, K, 5);
    ThreadPool pool(2);
    std::vector<float> fast(M * N), ref(M * N);
    kernels::cpu::matmul_multi(std::vector<const TensorView*>{&W.view}.data(), 1, x.data(), M,
                               std::vector<float*>{fast.data()}.data(), pool);
    kernels::ref::matmul(W.view, x.data(), M, ref.data(), pool);
    for (int m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        const float tol = tolerance(t, &W.deq[n * K], &x[m * K], K);
        ASSERT_NEAR(fast[m * N + n], ref[m * N + n], tol)
            << dtype_name(t) << " K=" << K << " row " << m << " column " << n;
      }
  }
}

// Rows computed alone, in groups of 6 and 16, inside a 20-row call (two tiles), in
// a different company, and with 1 or 2 threads must agree bit for bit.
TEST_P(MatmulTypes, BatchInvariantBitExact) {
  const DType t = GetParam();
  const int64_t K = 512, N = 45;
  const int M = 20;
  auto W = random_matrix(t, K, N, 3);
  auto x = random_rows(M, K, 9);
  ThreadPool pool2(2), pool1(1);
  std::vector<float> all(M * N);
  kernels::matmul(W.view, x.data(), M, all.data(), pool2);

  auto expect_rows = [&](const float* got, int first, int count, const char* what) {
    for (int m = 0; m < count; ++m)
      ASSERT_EQ(0, std::memcmp(got + m * N, &all[(first + m) * N], N * sizeof(float)))
          << dtype_name(t) << ": row " << first + m << " differs when computed " << what;
  };
  std::vector<float> y(M * N);
  for (int m = 0; m < M; ++m) {
    kernels::matmul(W.view, &x[m * K], 1, y.data(), pool2);
    expect_rows(y.data(), m, 1, "alone (M = 1)");
  }
  for (int first : {0, 5, 14}) {
    kernels::matmul(W.view, &x[first * K], 6, y.data(), pool2);
    expect_rows(y.data(), first, 6, "in a group of 6");
  }
  kernels::matmul(W.view, &x[4 * K], 16, y.data(), pool1);
  expect_rows(y.data(), 4, 16, "in a group of 16 on one thread");

  // Row 0 next to rows it has never been with (a copy of row 19 and zeros).
  std::vector<float> mixed(3 * K, 0.0f);
  std::memcpy(mixed.data(), &x[0], K * sizeof(float));
  std::memcpy(&mixed[K], &x[19 * K], K * sizeof(float));
  kernels::matmul(W.view, mixed.data(), 3, y.data(), pool2);
  expect_rows(y.data(), 0, 1, "next to other rows");
  expect_rows(y.data() + N, 19, 1, "next to other rows");
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, MatmulTypes,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                           DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                           DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                                           DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(MatmulMulti, SameBitsAsSeparateCalls) {
  const int64_t K = 512;
  const int M = 6;
  auto A = random_matrix(DType::Q4_K, K, 40, 1);
  auto B = random_matrix(DType::Q6_K, K, 24, 2);
  auto C = random_matrix(DType::Q8_0, K, 8, 3);
  auto x = random_rows(M, K, 4);
  ThreadPool pool(2);
  std::vector<float> ya(M * 40), yb(M * 24), yc(M * 8), sa(M * 40), sb(M * 24), sc(M * 8);
  const TensorView* ws[] = {&A.view, &B.view, &C.view};
  float* ys[] = {ya.data(), yb.data(), yc.data()};
  kernels::matmul_multi(ws, 3, x.data(), M, ys, pool);
  kernels::matmul(A.view, x.data(), M, sa.data(), pool);
  kernels::matmul(B.view, x.data(), M, sb.data(), pool);
  kernels::matmul(C.view, x.data(), M, sc.data(), pool);
  EXPECT_EQ(0, std::memcmp(ya.data(), sa.data(), ya.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(yb.data(), sb.data(), yb.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(yc.data(), sc.data(), yc.size() * sizeof(float)));
}

TEST(MatmulMulti, RejectsMismatchedInnerDimensions) {
  auto A = random_matrix(DType::Q8_0, 64, 4, 1);
  auto B = random_matrix(DType::Q8_0, 96, 4, 2);
  auto x = random_rows(1, 64, 3);
  ThreadPool pool(1);
  std::vector<float> ya(4), yb(4);
  const TensorView* ws[] = {&A.view, &B.view};
  float* ys[] = {ya.data(), yb.data()};
  EXPECT_THROW(kernels::matmul_multi(ws, 2, x.data(), 1, ys, pool), Error);
}

}  // namespace
