// The SIMD matmul against the scalar reference (within a derived tolerance), for
// the quantized types also against the same dot product over the quantized
// activations (within float rounding), and its batch invariance (bit-exact
// whatever the number of rows, their company, the thread count, or whether
// matrices share a matmul_multi call), for every weight type; and all of that
// again on every instruction set this build compiled and this machine runs.
#include "kernels/cpu/hwy_targets.h"  // first: the same Highway targets as the kernels

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/kernels.h"
#include "kernels/ref/ref_kernels.h"
#include "quant/quants.h"
#include "support/test_util.h"

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

// The SIMD kernels of `target` (0: this CPU's best) on `pool`, with scratch for
// every call these tests make (up to 32 rows of up to 1024).
std::unique_ptr<kernels::Kernels> simd(ThreadPool& pool, int64_t target = 0) {
  return kernels::Kernels::create({.simd_target = target}, pool, {.max_rows = 32, .max_k = 1024});
}

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

// The activations as the quantized kernels see them: x_k rounded to its block's
// int8 grid (activations.h), for a reference that differs from the kernels only
// by float rounding.
std::vector<double> quantized_rows(const std::vector<float>& x, int M, int64_t K, DType t,
                                   int64_t target) {
  kernels::cpu::QActs a;
  kernels::cpu::quantize_acts(kernels::cpu::target_kernels(target), x.data(), M, K,
                              is_k_quant(t) ? 256 : 32, a);
  std::vector<double> out(static_cast<size_t>(M) * K);
  for (int m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const int8_t q =
          a.row_q(m)[k / 256 * 256 + 64 * ((k % 16) / 4) + 4 * ((k % 256) / 16) + k % 4];
      out[m * K + k] = static_cast<double>(q) * a.row_gd(m)[k / 16];
    }
  return out;
}

// Fast kernel against the dot product of the dequantized weights with the
// quantized activations (in double). Only float rounding separates them: per
// 16-element group a convert, a multiply and two FMAs, then sums over K / 16
// groups, each step off by at most 2^-24 of magnitudes no larger than a few
// times sum |w_k xq_k| (the codes' offsets cancel: Q8_0 stores q + 128). 1e-4 of
// that sum is a wide margin yet catches any wrong code, scale or offset.
void expect_tight_match(const Matrix& W, DType t, const std::vector<float>& x, int M, int64_t K,
                        const std::vector<float>& fast, const char* where, int64_t target = 0) {
  const int64_t N = W.view.ne(1);
  const auto xq = quantized_rows(x, M, K, t, target);
  for (int m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double want = 0.0, mag = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        want += W.deq[n * K + k] * xq[m * K + k];
        mag += std::fabs(W.deq[n * K + k] * xq[m * K + k]);
      }
      ASSERT_NEAR(fast[m * N + n], want, 1e-4 * mag + 1e-6)
          << dtype_name(t) << " K=" << K << " row " << m << " column " << n << " " << where;
    }
}

class MatmulTypes : public ::testing::TestWithParam<DType> {};

// K = 96, 576 and 896 end in a partial 256-element chunk (3, 2 and 4 legacy
// blocks of 8); 768 is three whole chunks.
TEST_P(MatmulTypes, MatchesReferenceWithinDerivedBound) {
  const DType t = GetParam();
  for (int64_t K : {int64_t{512}, int64_t{96}, int64_t{576}, int64_t{768}, int64_t{896}}) {
    if (is_k_quant(t) && K % 256 != 0) continue;
    const int64_t N = 37;
    const int M = 7;
    auto W = random_matrix(t, K, N, 11);
    auto x = random_rows(M, K, 5);
    ThreadPool pool(2);
    std::vector<float> fast(M * N), ref(M * N);
    simd(pool)->matmul_multi(std::vector<const TensorView*>{&W.view}.data(), 1, x.data(), M,
                             std::vector<float*>{fast.data()}.data());
    kernels::ref::matmul(W.view, x.data(), M, ref.data(), pool);
    for (int m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        const float tol = tolerance(t, &W.deq[n * K], &x[m * K], K);
        ASSERT_NEAR(fast[m * N + n], ref[m * N + n], tol)
            << dtype_name(t) << " K=" << K << " row " << m << " column " << n;
      }
    if (!is_float(t)) expect_tight_match(W, t, x, M, K, fast, "");
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
  auto on2 = simd(pool2), on1 = simd(pool1);
  std::vector<float> all(M * N);
  on2->matmul(W.view, x.data(), M, all.data());

  auto expect_rows = [&](const float* got, int first, int count, const char* what) {
    for (int m = 0; m < count; ++m)
      ASSERT_EQ(0, std::memcmp(got + m * N, &all[(first + m) * N], N * sizeof(float)))
          << dtype_name(t) << ": row " << first + m << " differs when computed " << what;
  };
  std::vector<float> y(M * N);
  for (int m = 0; m < M; ++m) {
    on2->matmul(W.view, &x[m * K], 1, y.data());
    expect_rows(y.data(), m, 1, "alone (M = 1)");
  }
  for (int first : {0, 5, 14}) {
    on2->matmul(W.view, &x[first * K], 6, y.data());
    expect_rows(y.data(), first, 6, "in a group of 6");
  }
  on1->matmul(W.view, &x[4 * K], 16, y.data());
  expect_rows(y.data(), 4, 16, "in a group of 16 on one thread");
  // Every row count up to two register tiles and beyond (tiles of 1..8 rows,
  // then 8 + remainder), on one thread so each call walks all columns itself.
  for (int count = 1; count <= 17; ++count) {
    on1->matmul(W.view, &x[(M - count) * K], count, y.data());
    const std::string what = "in a call of " + std::to_string(count) + " rows";
    expect_rows(y.data(), M - count, count, what.c_str());
  }

  // Row 0 next to rows it has never been with (a copy of row 19 and zeros).
  std::vector<float> mixed(3 * K, 0.0f);
  std::memcpy(mixed.data(), &x[0], K * sizeof(float));
  std::memcpy(&mixed[K], &x[19 * K], K * sizeof(float));
  on2->matmul(W.view, mixed.data(), 3, y.data());
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
  auto k = simd(pool);
  k->matmul_multi(ws, 3, x.data(), M, ys);
  k->matmul(A.view, x.data(), M, sa.data());
  k->matmul(B.view, x.data(), M, sb.data());
  k->matmul(C.view, x.data(), M, sc.data());
  EXPECT_EQ(0, std::memcmp(ya.data(), sa.data(), ya.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(yb.data(), sb.data(), yb.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(yc.data(), sc.data(), yc.size() * sizeof(float)));
}

// Matrices of equal widths (gate and up) in one call: every column computed
// once and with the bits of a separate call, whatever the chunk count (from
// fewer chunks than threads to many) against the thread count.
TEST(MatmulMulti, EqualWidthsSameBitsAsSeparateCallsOnAnyThreadCount) {
  const int64_t K = 512;
  for (int64_t N : {16, 48, 160, 1040}) {
    auto A = random_matrix(DType::Q4_0, K, N, 5);
    auto B = random_matrix(DType::Q4_K, K, N, 6);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      auto k = simd(pool);
      for (int M : {1, 5}) {
        auto x = random_rows(M, K, 7);
        std::vector<float> ya(M * N, NAN), yb(M * N, NAN), sa(M * N), sb(M * N);
        const TensorView* ws[] = {&A.view, &B.view};
        float* ys[] = {ya.data(), yb.data()};
        k->matmul_multi(ws, 2, x.data(), M, ys);
        k->matmul(A.view, x.data(), M, sa.data());
        k->matmul(B.view, x.data(), M, sb.data());
        ASSERT_EQ(0, std::memcmp(ya.data(), sa.data(), ya.size() * sizeof(float)))
            << "N " << N << ", " << threads << " threads, M " << M;
        ASSERT_EQ(0, std::memcmp(yb.data(), sb.data(), yb.size() * sizeof(float)))
            << "N " << N << ", " << threads << " threads, M " << M;
      }
    }
  }
}

TEST(MatmulMulti, RejectsMismatchedInnerDimensions) {
  auto A = random_matrix(DType::Q8_0, 64, 4, 1);
  auto B = random_matrix(DType::Q8_0, 96, 4, 2);
  auto x = random_rows(1, 64, 3);
  ThreadPool pool(1);
  std::vector<float> ya(4), yb(4);
  const TensorView* ws[] = {&A.view, &B.view};
  float* ys[] = {ya.data(), yb.data()};
  EXPECT_THROW(simd(pool)->matmul_multi(ws, 2, x.data(), 1, ys), Error);
}

// Row m of the output at y + m * ldy: the values of a dense call, and nothing
// written outside the matrix's columns (the LM head writes its vocabulary
// ranges straight into the logits this way). Packed where the machine packs.
TEST(MatmulStrided, SameBitsInRowsOfAWiderMatrix) {
  const int64_t K = 512, N = 48, ld = 100, at = 32;
  const int M = 5;
  auto W = random_matrix(DType::Q4_K, K, N, 5);
  auto x = random_rows(M, K, 6);
  ThreadPool pool(2);
  auto k = simd(pool);
  const AlignedVector<uint8_t> packed = kernels::pack_weights(W.view, {}, pool);
  TensorView view = W.view;
  view.packed = packed.empty() ? nullptr : packed.data();
  std::vector<float> dense(M * N), wide(M * ld, -7.0f);
  k->matmul(view, x.data(), M, dense.data());
  k->matmul_strided(view, x.data(), M, wide.data() + at, ld);
  for (int m = 0; m < M; ++m)
    for (int64_t n = 0; n < ld; ++n) {
      if (n >= at && n < at + N)
        ASSERT_EQ(wide[m * ld + n], dense[m * N + n - at]) << "row " << m << " column " << n;
      else
        ASSERT_EQ(wide[m * ld + n], -7.0f) << "row " << m << " column " << n << " overwritten";
    }
  EXPECT_THROW(k->matmul_strided(view, x.data(), M, wide.data(), N - 1), Error);
}

// A Kernels object's scratch is sized once: calls beyond it fail clearly instead
// of allocating.
TEST(KernelsObject, RefusesCallsBeyondItsLimits) {
  ThreadPool pool(1);
  auto k = simd(pool);  // 32 rows of up to 1024
  auto W = random_matrix(DType::Q8_0, 64, 8, 1);
  auto x = random_rows(33, 64, 2);
  std::vector<float> y(33 * 8);
  EXPECT_NO_THROW(k->matmul(W.view, x.data(), 32, y.data()));
  const std::string too_many = test::error_of([&] { k->matmul(W.view, x.data(), 33, y.data()); });
  EXPECT_NE(too_many.find("33 rows of 64 exceed the kernels' scratch"), std::string::npos)
      << too_many;
  auto long_rows = random_matrix(DType::F32, 1056, 4, 3);
  auto x_long = random_rows(1, 1056, 4);
  const std::string too_long =
      test::error_of([&] { k->matmul(long_rows.view, x_long.data(), 1, y.data()); });
  EXPECT_NE(too_long.find("1 rows of 1056 exceed"), std::string::npos) << too_long;
}

TEST(KernelsObject, ChosenByTheConfiguration) {
  ThreadPool pool(1);
  kernels::KernelLimits limits;
  EXPECT_STREQ(kernels::Kernels::create({.reference = true}, pool, limits)->name(), "reference");
  EXPECT_STREQ(kernels::Kernels::create({}, pool, limits)->name(),
               kernels::cpu::simd_target_name());
  const std::string bad_target =
      test::error_of([&] { kernels::Kernels::create({.simd_target = 3}, pool, limits); });
  EXPECT_NE(bad_target.find("not one this build compiled"), std::string::npos) << bad_target;
  // No packed copies when packing is off or the reference kernels run.
  auto W = random_matrix(DType::Q6_K, 256, 32, 1);
  EXPECT_TRUE(kernels::pack_weights(W.view, {.pack = false}, pool).empty());
  EXPECT_TRUE(kernels::pack_weights(W.view, {.reference = true}, pool).empty());
}

// The kernels load whole vectors; none may read past the last weight row. The
// matrix is placed so that it ends exactly where an inaccessible page begins, so
// any over-read faults.
TEST_P(MatmulTypes, NeverReadsPastTheWeights) {
  const DType t = GetParam();
  const long page = sysconf(_SC_PAGESIZE);
  for (int64_t K : {int64_t{256}, int64_t{96}, int64_t{576}, int64_t{896}}) {
    if (is_k_quant(t) && K % 256 != 0) continue;
    const int64_t N = 5;
    auto W = random_matrix(t, K, N, 21);
    const size_t bytes = W.bytes.size();
    const size_t span = (bytes + page - 1) / page * page;
    void* region =
        mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(region, MAP_FAILED);
    auto* guard = static_cast<uint8_t*>(region) + span;
    ASSERT_EQ(0, mprotect(guard, page, PROT_NONE));
    uint8_t* data = guard - bytes;
    std::memcpy(data, W.bytes.data(), bytes);
    TensorView v = W.view;
    v.data = data;
    auto x = random_rows(3, K, 8);
    std::vector<float> got(3 * N), want(3 * N);
    ThreadPool pool(1);
    auto k = simd(pool);
    k->matmul(v, x.data(), 3, got.data());
    k->matmul(W.view, x.data(), 3, want.data());
    munmap(region, span + page);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << dtype_name(t) << " K=" << K;
  }
}

// The activation layout the quantized kernels rely on (activations.h): granule k
// of group j at byte 64k + 4j of its chunk, per-group scale and code sum, zero
// padding past K, and the derived sums.
TEST(QuantizedActivations, ChunkLayoutScalesSumsAndPadding) {
  for (int block : {32, 256}) {
    const int64_t K = block == 32 ? 352 : 512;  // 352: 1.375 chunks
    const int M = 2;
    auto x = random_rows(M, K, 13);
    kernels::cpu::QActs a;
    kernels::cpu::quantize_acts(kernels::cpu::best_target_kernels(), x.data(), M, K, block, a);
    ASSERT_EQ(a.Kp, (K + 255) / 256 * 256);
    for (int m = 0; m < M; ++m) {
      for (int64_t b0 = 0; b0 < a.Kp; b0 += block) {
        float amax = 0.0f;
        for (int64_t k = b0; k < b0 + block && k < K; ++k)
          amax = std::max(amax, std::fabs(x[m * K + k]));
        const float d = amax / 127.0f;
        for (int64_t e = b0; e < b0 + block; e += 16) {
          const int64_t g = e / 16;
          int sum = 0;
          for (int i = 0; i < 16; ++i) {
            const int64_t k = e + i;
            const int j = static_cast<int>(g % 16), gran = i / 4;
            const int8_t q = a.row_q(m)[k / 256 * 256 + 64 * gran + 4 * j + i % 4];
            // Round-to-nearest of x / d (ties may go either way: allow the two neighbours).
            const float want = k < K && amax > 0.0f ? x[m * K + k] * 127.0f / amax : 0.0f;
            ASSERT_LE(std::fabs(q - want), 0.5f + 1e-4f) << "row " << m << " element " << k;
            sum += q;
          }
          ASSERT_EQ(a.row_gsum(m)[g], static_cast<float>(sum)) << "group " << g;
          ASSERT_EQ(a.row_gd(m)[g], e < K ? d : 0.0f) << "group " << g;
        }
      }
      // The derived sums the packed kernels start their chains from: per 32
      // elements the codes' sum, and -8 times it (block 32) or per group -32
      // times the group's sum (block 256).
      for (int64_t p = 0; p < a.Kp / 32; ++p) {
        const float s32 = a.row_gsum(m)[2 * p] + a.row_gsum(m)[2 * p + 1];
        ASSERT_EQ(a.row_sum32(m)[p], s32) << "pair " << p;
        if (block == 32) {
          ASSERT_EQ(a.row_q4_offset(m)[p], -8 * static_cast<int32_t>(s32)) << "pair " << p;
        }
      }
      for (int64_t g = 0; block == 256 && g < a.Kp / 16; ++g) {
        ASSERT_EQ(a.row_q6_offset(m)[g], -32 * static_cast<int32_t>(a.row_gsum(m)[g]))
            << "group " << g;
      }
    }
  }
}

// The packed 16-row layout (packed_layout.h), where this machine's kernel reads
// it: the same checks as the file layout (reference bound, tight match, batch
// invariance bit for bit), plus row ranges, the shapes that stay unpacked, and
// every other target with a packed kernel (AVX2 on an AVX-512 machine) computing
// the same bits: a lane is a weight row there, whatever the vector width.
class PackedMatmul : public ::testing::TestWithParam<DType> {};

TEST_P(PackedMatmul, MatchesReferenceAndIsBatchInvariant) {
  if (!kernels::cpu::packed_kernel_available())
    GTEST_SKIP() << "neither AVX-512 VNNI nor AVX2 here";
  const DType t = GetParam();
  // Three panels of three super-blocks, or of nine legacy records (K = 576 ends
  // in a partial 256-element activation chunk).
  const int64_t K = is_k_quant(t) ? 768 : 576, N = 48;
  const int M = 20;  // tiles of 8, 8 and 4 rows
  auto W = random_matrix(t, K, N, 17);
  ThreadPool pool2(2), pool1(1);
  auto on2 = simd(pool2), on1 = simd(pool1);
  const AlignedVector<uint8_t> packed = kernels::pack_weights(W.view, {}, pool2);
  ASSERT_EQ(packed.size(), size_t(N / 16) * (K / kernels::cpu::packed_record_elements(t)) *
                               kernels::cpu::packed_record_bytes(t));
  TensorView view = W.view;
  view.packed = packed.data();
  auto x = random_rows(M, K, 19);
  std::vector<float> all(M * N), ref(M * N), y(M * N);
  on2->matmul(view, x.data(), M, all.data());
  kernels::ref::matmul(W.view, x.data(), M, ref.data(), pool2);
  for (int m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      ASSERT_NEAR(all[m * N + n], ref[m * N + n], tolerance(t, &W.deq[n * K], &x[m * K], K))
          << dtype_name(t) << " row " << m << " column " << n;
  expect_tight_match(W, t, x, M, K, all, "packed");
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if (!kernels::cpu::packed_kernel_available(target)) continue;
    std::vector<float> other(M * N);
    simd(pool2, target)->matmul(view, x.data(), M, other.data());
    ASSERT_EQ(0, std::memcmp(other.data(), all.data(), all.size() * sizeof(float)))
        << dtype_name(t) << ": " << hwy::TargetName(target) << " differs from "
        << kernels::cpu::simd_target_name();
  }

  auto expect_rows = [&](const float* got, int first, int count, const std::string& what) {
    for (int m = 0; m < count; ++m)
      ASSERT_EQ(0, std::memcmp(got + m * N, &all[(first + m) * N], N * sizeof(float)))
          << dtype_name(t) << ": row " << first + m << " differs when computed " << what;
  };
  for (int count = 1; count <= 17; ++count) {
    on1->matmul(view, &x[(M - count) * K], count, y.data());
    expect_rows(y.data(), M - count, count, "in a call of " + std::to_string(count) + " rows");
  }
  on2->matmul(view, &x[3 * K], 6, y.data());
  expect_rows(y.data(), 3, 6, "in a group of 6 on two threads");

  // Rows [16, 48) as a range keep the packed form; [8, 40) cannot and read the file.
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{16, 48}, {8, 40}}) {
    const TensorView part = kernels::row_range(view, begin, end);
    EXPECT_EQ(part.packed != nullptr, begin % 16 == 0) << begin;
    const int64_t n_part = end - begin;
    std::vector<float> got(2 * n_part);
    on1->matmul(part, x.data(), 2, got.data());
    for (int m = 0; m < 2; ++m)
      for (int64_t n = 0; n < n_part; ++n) {
        const float want = all[m * N + begin + n];
        if (part.packed)
          ASSERT_EQ(got[m * n_part + n], want) << "range [" << begin << ", " << end << ")";
        else
          ASSERT_NEAR(got[m * n_part + n], want,
                      tolerance(t, &W.deq[(begin + n) * K], &x[m * K], K));
      }
  }
}

// Every code at its type's largest value, against activations all at +127, all
// at -127 and alternating: the largest sums the integer chains ever hold. AVX2
// adds up to WordTerms(max code) pair sums in 16-bit lanes (matmul_packed.cpp):
// one term too many there wraps a sum by 65536 and misses the reference by far
// more than its tolerance.
std::vector<uint8_t> extreme_block(DType t) {
  std::vector<uint8_t> b(dtype_info(t).type_size, 0xFF);  // codes all ones
  auto half = [&](size_t at, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(&b[at], &h, 2);
  };
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:  // Q8_0: 0xFF is -1; make them +127
      half(0, 0.01f);
      if (t == DType::Q8_0) std::memset(&b[2], 0x7F, 32);
      break;
    case DType::Q4_1:
      half(0, 0.01f), half(2, 0.0f);
      break;
    case DType::Q4_K:  // scales bytes all ones: every scale and min 63
      half(0, 0.001f), half(2, 0.0f);
      break;
    case DType::Q6_K:
      std::memset(&b[192], 1, 16);  // int8 scales 1
      half(208, 0.01f);
      break;
    default:
      ADD_FAILURE() << "no extreme block for " << dtype_name(t);
  }
  return b;
}

TEST_P(PackedMatmul, ExtremeCodesFitTheIntegerChains) {
  if (!kernels::cpu::packed_kernel_available())
    GTEST_SKIP() << "neither AVX-512 VNNI nor AVX2 here";
  const DType t = GetParam();
  const int64_t K = is_k_quant(t) ? 512 : 128, N = 16;
  const std::vector<uint8_t> block = extreme_block(t);
  Matrix W;
  for (int64_t i = 0; i < N * K / dtype_info(t).block_size; ++i)
    W.bytes.insert(W.bytes.end(), block.begin(), block.end());
  W.deq.resize(N * K);
  for (int64_t n = 0; n < N; ++n)
    dequantize_row(t, W.bytes.data() + n * dtype_row_bytes(t, K), &W.deq[n * K], K);
  W.view.name = "w";
  W.view.type = t;
  W.view.shape = {K, N};
  W.view.data = W.bytes.data();
  W.view.nbytes = W.bytes.size();
  const int M = 3;
  std::vector<float> x(M * K);
  for (int64_t k = 0; k < K; ++k)
    x[k] = 1.0f, x[K + k] = -1.0f, x[2 * K + k] = k % 2 ? 1.0f : -1.0f;
  ThreadPool pool(1);
  const AlignedVector<uint8_t> packed = kernels::pack_weights(W.view, {}, pool);
  ASSERT_FALSE(packed.empty());
  TensorView view = W.view;
  view.packed = packed.data();
  std::vector<float> got(M * N), ref(M * N);
  simd(pool)->matmul(view, x.data(), M, got.data());
  kernels::ref::matmul(W.view, x.data(), M, ref.data(), pool);
  for (int m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      ASSERT_NEAR(got[m * N + n], ref[m * N + n], tolerance(t, &W.deq[n * K], &x[m * K], K))
          << dtype_name(t) << " row " << m << " column " << n;
}

TEST(PackedMatmulShapes, OnlyWholePanelsOfPackableTypes) {
  ThreadPool pool(1);
  EXPECT_TRUE(kernels::pack_weights(random_matrix(DType::Q4_K, 256, 40, 1).view, {}, pool).empty())
      << "40 rows are not whole panels of 16";
  EXPECT_TRUE(kernels::pack_weights(random_matrix(DType::Q5_K, 256, 32, 1).view, {}, pool).empty())
      << "Q5_K has no packed layout";
  EXPECT_TRUE(kernels::pack_weights(random_matrix(DType::Q8_0, 96, 32, 1).view, {}, pool).empty())
      << "96 elements are not whole records of 64";
  EXPECT_EQ(kernels::pack_weights(random_matrix(DType::Q6_K, 256, 32, 1).view, {}, pool).empty(),
            !kernels::cpu::packed_kernel_available());
}

// Prefetching the weights non-temporally or into L2 (KernelConfig::stream_prefetch)
// moves only where cache lines go: every result is bit-identical, packed or in
// the file's layout, for one tile of rows (where the hint applies) and for more.
TEST_P(PackedMatmul, StreamPrefetchLeavesResultsBitIdentical) {
  const DType t = GetParam();
  const int64_t K = is_k_quant(t) ? 768 : 576, N = 48;
  auto W = random_matrix(t, K, N, 23);
  ThreadPool pool(2);
  const AlignedVector<uint8_t> packed = kernels::pack_weights(W.view, {}, pool);
  TensorView view = W.view;
  view.packed = packed.empty() ? nullptr : packed.data();
  const kernels::KernelLimits limits{.max_rows = 32, .max_k = 1024};
  auto l2 =
      kernels::Kernels::create({.stream_prefetch = kernels::StreamPrefetch::L2}, pool, limits);
  auto nta = kernels::Kernels::create({.stream_prefetch = kernels::StreamPrefetch::NonTemporal},
                                      pool, limits);
  for (const TensorView& v : {view, W.view})
    for (int M : {1, 6, 8, 9, 20}) {
      const auto x = random_rows(M, K, 29);
      std::vector<float> a(M * N), b(M * N);
      l2->matmul(v, x.data(), M, a.data());
      nta->matmul(v, x.data(), M, b.data());
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << dtype_name(t) << (v.packed ? " packed" : " file layout") << ", " << M << " rows";
    }
}

INSTANTIATE_TEST_SUITE_P(PackedTypes, PackedMatmul,
                         ::testing::Values(DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Every Highway target this build compiled and this machine supports, not just
// the one the dispatcher picks: AVX3_DL runs the register kernels, AVX3, AVX2 and
// SSE4 the portable ones, SCALAR the dequantizing fallback.

class EveryTarget : public ::testing::TestWithParam<int64_t> {};

TEST_P(EveryTarget, MatchesReferencesAndIsBatchInvariant) {
  ThreadPool pool(2);
  auto k = simd(pool, GetParam());
  ASSERT_STREQ(hwy::TargetName(GetParam()), k->name());
  for (DType t :
       {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
        DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int64_t K = is_k_quant(t) ? 768 : 608;  // 608: 19 legacy blocks, a partial chunk
    const int64_t N = 19;
    const int M = 11;  // a tile of 8 and one of 3 on AVX3_DL
    auto W = random_matrix(t, K, N, 7);
    auto x = random_rows(M, K, 5);
    std::vector<float> fast(M * N), ref(M * N), one(N);
    k->matmul(W.view, x.data(), M, fast.data());
    kernels::ref::matmul(W.view, x.data(), M, ref.data(), pool);
    for (int m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n)
        ASSERT_NEAR(fast[m * N + n], ref[m * N + n], tolerance(t, &W.deq[n * K], &x[m * K], K))
            << dtype_name(t) << " row " << m << " column " << n;
      k->matmul(W.view, &x[m * K], 1, one.data());
      ASSERT_EQ(0, std::memcmp(one.data(), &fast[m * N], N * sizeof(float)))
          << dtype_name(t) << ": row " << m << " differs when computed alone";
    }
    if (!is_float(t) && GetParam() != HWY_SCALAR)  // SCALAR uses float activations
      expect_tight_match(W, t, x, M, K, fast, hwy::TargetName(GetParam()), GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(CompiledAndSupported, EveryTarget,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         [](const auto& info) { return std::string(hwy::TargetName(info.param)); });

}  // namespace
