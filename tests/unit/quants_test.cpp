// The scalar block formats: f16/bf16 conversions, block sizes, quantize ->
// dequantize error bounds per type, special inputs (zeros, constants, negative,
// huge, tiny), the bit layout of hand-built blocks, idempotence, and errors.
// Bit-exactness against GGML's own decoder is checked by
// tests/python/test_quants_reference.py (gguf-py).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/quant_blocks.h"
#include "quant/quants.h"

using namespace tandem;
using namespace tandem::quant_detail;

namespace {

const DType kBlockTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                             DType::Q8_0, DType::Q8_1, DType::Q2_K, DType::Q3_K,
                             DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K};

int block_size(DType t) { return dtype_info(t).block_size; }
int block_bytes(DType t) { return dtype_info(t).type_size; }

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(dtype_row_bytes(t, static_cast<int64_t>(x.size())));
  quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, size_t n) {
  std::vector<float> y(n);
  dequantize_row(t, q.data(), y.data(), static_cast<int64_t>(n));
  return y;
}

// Gaussian values times `scale`, plus `offset`.
std::vector<float> gaussian(size_t n, float scale, float offset, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng) * scale + offset;
  return x;
}

float max_abs(const float* x, int n) {
  float m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// fp16 keeps 11 significant bits: rounding a normal float to it changes it by
// at most 2^-11 relative. The tests keep block scales in the normal fp16 range.
constexpr double kHalfRel = 1.0 / 2048;
// Slack for float32 arithmetic in quantizer and decoder: a few roundings of
// values no larger than twice the block's largest |x|, each 2^-24 relative.
constexpr double kFloatSlack = 1e-6;

// --- per-element error bounds --------------------------------------------------
//
// Each returns the largest |x - y| the format allows for element i of a block,
// from the block's data (legacy types: GGML's reference rounding) or from the
// scales stored in the block (K-quants: tandem's own scale choice).

// Q4_0/Q5_0: levels q - half in [-half, half - 1], d = max / -half (max: the
// signed largest-magnitude element), so x / d lies in [-half, half]. Rounding
// errs by d/2, except that x / d above half - 0.5 clips to half - 1 (the
// opposite-sign extreme: up to one step); fp16 rounding of d adds up to
// half * |d| * 2^-11.
double symmetric_legacy_bound(const float* x, int i, int half) {
  float amax = 0, max = 0;
  for (int j = 0; j < kQK; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  const double d = max / -static_cast<double>(half);
  if (d == 0) return 0;
  const double v = x[i] / d;
  return std::fabs(d) * (std::max(0.5, v - (half - 1)) + half * kHalfRel) + kFloatSlack * amax;
}

// Q4_1/Q5_1: x = q * d + m with m = min, d = (max - min) / nmax, q rounded to
// nearest: d/2, plus fp16 rounding of m (|min| 2^-11) and of d (nmax d 2^-11).
double affine_legacy_bound(const float* x, int nmax) {
  float min = x[0], max = x[0];
  for (int j = 0; j < kQK; ++j) min = std::min(min, x[j]), max = std::max(max, x[j]);
  const double d = (static_cast<double>(max) - min) / nmax;
  return d / 2 + (std::fabs(min) + nmax * d) * kHalfRel + kFloatSlack * max_abs(x, kQK);
}

// Q8_0/Q8_1: d = absmax / 127, round to nearest: d/2, plus 127 d 2^-11 for fp16 d.
double q8_legacy_bound(const float* x) {
  const double d = max_abs(x, kQK) / 127.0;
  return d / 2 + 127 * d * kHalfRel + kFloatSlack * max_abs(x, kQK);
}

// The K-quants' sub-block steps (d * sc) and offsets (dmin * m) as stored.
struct KScales {
  int n_sub = 0;
  float step[16] = {}, offset[16] = {};
  float d = 0, dmin = 0;
};

KScales read_k_scales(DType t, const uint8_t* block) {
  KScales k;
  switch (t) {
    case DType::Q2_K: {
      BlockQ2_K b;
      std::memcpy(&b, block, sizeof b);
      k.n_sub = 16, k.d = f16_to_f32(b.d), k.dmin = f16_to_f32(b.dmin);
      for (int j = 0; j < 16; ++j)
        k.step[j] = k.d * (b.scales[j] & 0xF), k.offset[j] = k.dmin * (b.scales[j] >> 4);
      break;
    }
    case DType::Q3_K: {
      BlockQ3_K b;
      std::memcpy(&b, block, sizeof b);
      k.n_sub = 16, k.d = f16_to_f32(b.d);
      for (int j = 0; j < 16; ++j) k.step[j] = k.d * (unpack_q3k_scale(b.scales, j) - 32);
      break;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      BlockQ4_K b;  // Q5_K starts with the same d, dmin, scales
      std::memcpy(&b, block, sizeof b);
      k.n_sub = 8, k.d = f16_to_f32(b.d), k.dmin = f16_to_f32(b.dmin);
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        unpack_k4_scale_min(b.scales, j, sc, m);
        k.step[j] = k.d * sc, k.offset[j] = k.dmin * m;
      }
      break;
    }
    case DType::Q6_K: {
      BlockQ6_K b;
      std::memcpy(&b, block, sizeof b);
      k.n_sub = 16, k.d = f16_to_f32(b.d);
      for (int j = 0; j < 16; ++j) k.step[j] = k.d * b.scales[j];
      break;
    }
    default:
      ADD_FAILURE() << "not a K-quant with sub-block scales";
  }
  return k;
}

// K-quant levels: affine types q in [0, nmax] (qneg = 0), symmetric q in [-qneg, qpos].
struct KLevels {
  int qneg, qpos;
  bool affine;
};
KLevels k_levels(DType t) {
  switch (t) {
    case DType::Q2_K:
      return {0, 3, true};
    case DType::Q3_K:
      return {4, 3, false};
    case DType::Q4_K:
      return {0, 15, true};
    case DType::Q5_K:
      return {0, 31, true};
    default:
      return {32, 31, false};  // Q6_K
  }
}

// Checks one K-quant super-block: every x is inside its sub-block's grid, so the
// error is at most half the stored step; and the step is not larger than needed:
// at most the sub-block's range over the level count plus the rounding-up of the
// codes (one unit d of the scale code, and for the affine types the offset's
// rounding-up by one dmin spread over nmax levels).
void check_k_block(DType t, const float* x, const uint8_t* block, const float* y,
                   const std::string& where) {
  const KScales k = read_k_scales(t, block);
  const KLevels lv = k_levels(t);
  const int len = kQK_K / k.n_sub;
  const double slack = kFloatSlack * max_abs(x, kQK_K);
  for (int j = 0; j < k.n_sub; ++j) {
    double lo = 0, hi = lv.affine ? x[j * len] : 0;
    for (int l = 0; l < len; ++l) {
      lo = std::min(lo, static_cast<double>(x[j * len + l]));
      hi = std::max(hi, static_cast<double>(x[j * len + l]));
    }
    const double need =
        lv.affine ? (hi - lo + k.dmin) / lv.qpos : std::max(hi / lv.qpos, -lo / lv.qneg);
    EXPECT_LE(k.step[j], need + k.d + slack) << where << " sub-block " << j;
    for (int l = 0; l < len; ++l) {
      const int e = j * len + l;
      ASSERT_LE(std::fabs(static_cast<double>(x[e]) - y[e]), k.step[j] / 2.0 + slack)
          << where << " element " << e << ": x " << x[e] << " y " << y[e] << " step " << k.step[j];
    }
  }
}

// Q8_K: float d = max / -127, round to nearest: |d| / 2 (no fp16 rounding).
void check_q8k_block(const float* x, const uint8_t* block, const float* y,
                     const std::string& where) {
  BlockQ8_K b;
  std::memcpy(&b, block, sizeof b);
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += b.qs[16 * j + l];
    EXPECT_EQ(b.bsums[j], sum) << where << " bsums[" << j << "]";
  }
  const double slack = kFloatSlack * max_abs(x, kQK_K);
  for (int e = 0; e < kQK_K; ++e)
    ASSERT_LE(std::fabs(static_cast<double>(x[e]) - y[e]), std::fabs(b.d) / 2.0 + slack)
        << where << " element " << e;
}

// Quantize x (whole blocks) with type t, decode, and check every block's error.
void check_round_trip(DType t, const std::vector<float>& x, const std::string& what) {
  const auto q = quantize(t, x);
  const auto y = dequantize(t, q, x.size());
  const int bs = block_size(t);
  for (size_t b = 0; b < x.size() / bs; ++b) {
    const float* xb = x.data() + b * bs;
    const float* yb = y.data() + b * bs;
    const uint8_t* qb = q.data() + b * block_bytes(t);
    const std::string where =
        std::string(dtype_name(t)) + " " + what + " block " + std::to_string(b);
    for (int i = 0; i < bs; ++i) ASSERT_TRUE(std::isfinite(yb[i])) << where << " element " << i;
    switch (t) {
      case DType::Q4_0:
      case DType::Q5_0:
        for (int i = 0; i < bs; ++i)
          ASSERT_LE(std::fabs(static_cast<double>(xb[i]) - yb[i]),
                    symmetric_legacy_bound(xb, i, t == DType::Q4_0 ? 8 : 16))
              << where << " element " << i << ": x " << xb[i] << " y " << yb[i];
        break;
      case DType::Q4_1:
      case DType::Q5_1: {
        const double bound = affine_legacy_bound(xb, t == DType::Q4_1 ? 15 : 31);
        for (int i = 0; i < bs; ++i)
          ASSERT_LE(std::fabs(static_cast<double>(xb[i]) - yb[i]), bound)
              << where << " element " << i << ": x " << xb[i] << " y " << yb[i];
        break;
      }
      case DType::Q8_0:
      case DType::Q8_1: {
        const double bound = q8_legacy_bound(xb);
        for (int i = 0; i < bs; ++i)
          ASSERT_LE(std::fabs(static_cast<double>(xb[i]) - yb[i]), bound)
              << where << " element " << i << ": x " << xb[i] << " y " << yb[i];
        break;
      }
      case DType::Q8_K:
        check_q8k_block(xb, qb, yb, where);
        break;
      default:
        check_k_block(t, xb, qb, yb, where);
        break;
    }
  }
}

// 8 blocks of a few kinds of data: centred, all positive (a large offset: the
// mins matter), all negative; at small, unit and large scales.
std::vector<std::pair<std::string, std::vector<float>>> sample_data(DType t) {
  const size_t n = 8 * static_cast<size_t>(block_size(t));
  std::vector<std::pair<std::string, std::vector<float>>> sets;
  uint32_t seed = 1;
  for (float scale : {0.1f, 1.0f, 1000.0f}) {
    auto s = std::to_string(scale);
    sets.emplace_back("centred x" + s, gaussian(n, scale, 0, seed++));
    sets.emplace_back("positive x" + s, gaussian(n, scale, 5 * scale, seed++));
    sets.emplace_back("negative x" + s, gaussian(n, scale, -5 * scale, seed++));
  }
  // Heavy-tailed: one sub-block much larger than the others.
  auto mixed = gaussian(n, 0.01f, 0, seed++);
  for (size_t i = 0; i < 16; ++i) mixed[i] *= 1000;
  sets.emplace_back("one loud sub-block", mixed);
  return sets;
}

}  // namespace

// --- sizes ------------------------------------------------------------------------

TEST(QuantBlocks, RowBytesMatchTheBlockStructs) {
  const std::pair<DType, size_t> blocks[] = {
      {DType::Q4_0, sizeof(BlockQ4_0)}, {DType::Q4_1, sizeof(BlockQ4_1)},
      {DType::Q5_0, sizeof(BlockQ5_0)}, {DType::Q5_1, sizeof(BlockQ5_1)},
      {DType::Q8_0, sizeof(BlockQ8_0)}, {DType::Q8_1, sizeof(BlockQ8_1)},
      {DType::Q2_K, sizeof(BlockQ2_K)}, {DType::Q3_K, sizeof(BlockQ3_K)},
      {DType::Q4_K, sizeof(BlockQ4_K)}, {DType::Q5_K, sizeof(BlockQ5_K)},
      {DType::Q6_K, sizeof(BlockQ6_K)}, {DType::Q8_K, sizeof(BlockQ8_K)},
  };
  for (auto [t, size] : blocks) {
    const int bs = block_size(t);
    EXPECT_EQ(bs, dtype_name(t).ends_with("_K") ? kQK_K : kQK) << dtype_name(t);
    EXPECT_EQ(dtype_row_bytes(t, bs), size) << dtype_name(t);
    EXPECT_EQ(dtype_row_bytes(t, 3 * bs), 3 * size) << dtype_name(t);
    EXPECT_TRUE(dtype_is_quantized(t));
  }
  EXPECT_EQ(dtype_row_bytes(DType::F32, 7), 28u);
  EXPECT_EQ(dtype_row_bytes(DType::F16, 7), 14u);
  EXPECT_EQ(dtype_row_bytes(DType::BF16, 7), 14u);
}

// --- f16 ----------------------------------------------------------------------------

TEST(F16, KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)) && f16_to_f32(0x8000) == 0.0f);
  EXPECT_EQ(f16_to_f32(0x7C00), INFINITY);
  EXPECT_EQ(f16_to_f32(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
}

TEST(F16, ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const float f = f16_to_f32(half);
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (is_nan) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      // NaNs come back quiet, with their sign and payload.
      ASSERT_EQ(f32_to_f16(f), h | 0x200) << std::hex << h;
    } else {
      ASSERT_EQ(f32_to_f16(f), h) << std::hex << h << " -> " << f;
    }
  }
}

TEST(F16, RoundsToNearestEven) {
  const float one = 1.0f, ulp = std::ldexp(1.0f, -10);        // half ulp at 1
  EXPECT_EQ(f32_to_f16(one + ulp / 2), 0x3C00);               // tie: to even (1.0)
  EXPECT_EQ(f32_to_f16(one + 3 * ulp / 2), 0x3C02);           // tie: to even (1 + 2 ulp)
  EXPECT_EQ(f32_to_f16(one + ulp / 2 + ulp / 1024), 0x3C01);  // just above the tie
  EXPECT_EQ(f32_to_f16(one + ulp / 2 - ulp / 1024), 0x3C00);  // just below
  EXPECT_EQ(f32_to_f16(-(one + 3 * ulp / 2)), 0xBC02);
  // Overflow: 65520 is the tie between 65504 and 65536 (inf); its even side is inf.
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7C00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xFC00);
  // Subnormals, in units of u = 2^-24.
  const float u = std::ldexp(1.0f, -24);
  EXPECT_EQ(f32_to_f16(u), 0x0001);
  EXPECT_EQ(f32_to_f16(u / 2), 0x0000);        // tie between 0 and u: 0
  EXPECT_EQ(f32_to_f16(u * 0.75f), 0x0001);    // above the tie
  EXPECT_EQ(f32_to_f16(u * 1.5f), 0x0002);     // tie between 1 and 2: 2
  EXPECT_EQ(f32_to_f16(u * 2.5f), 0x0002);     // tie between 2 and 3: 2
  EXPECT_EQ(f32_to_f16(u * 1023.5f), 0x0400);  // rounds up into the normals
  EXPECT_EQ(f32_to_f16(u * 1023.25f), 0x03FF);
  EXPECT_EQ(f32_to_f16(1e-10f), 0x0000);
  EXPECT_EQ(f32_to_f16(-1e-10f), 0x8000);
  EXPECT_EQ(f32_to_f16(1e-45f), 0x0000);  // a float subnormal
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion (IEEE round to nearest even) as an
// independent oracle, over a sweep of float bit patterns (every 997th, which
// visits every exponent and a spread of mantissas, including the subnormal and
// overflow boundaries' neighbourhoods).
TEST(F16, MatchesCompilerFloat16) {
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 997) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(u));
    const uint16_t want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    const uint16_t got = f32_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(f16_to_f32(got))) << std::hex << u;
    } else {
      ASSERT_EQ(got, want) << std::hex << "float bits " << u << " (" << f << ")";
    }
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(h)));
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << std::hex << h;
    }
  }
}
#endif

// --- bf16 ---------------------------------------------------------------------------

TEST(BF16, ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const float f = bf16_to_f32(half);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), h << 16);  // bf16 is the top half of a float
    const bool is_nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
    ASSERT_EQ(f32_to_bf16(f), is_nan ? (h | 0x40) : h) << std::hex << h;  // NaN: made quiet
  }
}

TEST(BF16, RoundsToNearestEven) {
  auto bf = [](uint32_t bits) { return f32_to_bf16(std::bit_cast<float>(bits)); };
  EXPECT_EQ(bf(0x3F808000), 0x3F80);  // tie: to even
  EXPECT_EQ(bf(0x3F818000), 0x3F82);  // tie: to even
  EXPECT_EQ(bf(0x3F808001), 0x3F81);  // above the tie
  EXPECT_EQ(bf(0x3F807FFF), 0x3F80);  // below the tie
  EXPECT_EQ(bf(0xBF818000), 0xBF82);
  EXPECT_EQ(bf(0x7F7FFFFF), 0x7F80);  // FLT_MAX rounds up to inf
  EXPECT_EQ(bf(0x7F800000), 0x7F80);  // inf
  EXPECT_EQ(bf(0x00018000), 0x0002);  // float subnormals round too (no flush to zero)
  EXPECT_EQ(bf(0x7F800001), 0x7FC0);  // signalling NaN -> quiet NaN
  EXPECT_EQ(bf(0xFFC00001), 0xFFC0);  // NaN sign kept
  EXPECT_EQ(bf(0x80000000), 0x8000);
}

// --- round trips --------------------------------------------------------------------

TEST(QuantRoundTrip, ErrorWithinTheFormatsBound) {
  for (DType t : kBlockTypes)
    for (const auto& [what, x] : sample_data(t)) check_round_trip(t, x, what);
}

TEST(QuantRoundTrip, FloatTypes) {
  auto x = gaussian(37, 3.0f, 0, 99);
  x[0] = 65504.0f, x[1] = 1e-7f, x[2] = -0.0f;
  auto y32 = dequantize(DType::F32, quantize(DType::F32, x), x.size());
  auto y16 = dequantize(DType::F16, quantize(DType::F16, x), x.size());
  auto yb = dequantize(DType::BF16, quantize(DType::BF16, x), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(y32[i]), std::bit_cast<uint32_t>(x[i]));
    EXPECT_EQ(y16[i], f16_to_f32(f32_to_f16(x[i])));
    EXPECT_EQ(yb[i], bf16_to_f32(f32_to_bf16(x[i])));
    // Rounding to nearest: within half an ulp (2^-11 / 2^-8 relative) in the
    // normal range; 1e-7 is an fp16 subnormal (absolute half-ulp 2^-25).
    EXPECT_LE(std::fabs(y16[i] - x[i]), std::fabs(x[i]) * kHalfRel + std::ldexp(1.0f, -25));
    EXPECT_LE(std::fabs(yb[i] - x[i]), std::fabs(x[i]) / 256);
  }
}

// --- special inputs -------------------------------------------------------------------

TEST(QuantSpecial, ZeroBlocksDecodeToZero) {
  for (DType t : kBlockTypes) {
    std::vector<float> x(2 * block_size(t), 0.0f);
    for (float y : dequantize(t, quantize(t, x), x.size())) ASSERT_EQ(y, 0.0f) << dtype_name(t);
  }
}

TEST(QuantSpecial, ConstantBlocksDecodeToOneValue) {
  for (DType t : kBlockTypes) {
    for (float c : {0.37f, -2.5f, 1000.0f, 1.0f}) {
      std::vector<float> x(block_size(t), c);
      check_round_trip(t, x, "constant " + std::to_string(c));
      auto y = dequantize(t, quantize(t, x), x.size());
      for (float v : y) ASSERT_EQ(v, y[0]) << dtype_name(t) << " constant " << c;
    }
  }
}

TEST(QuantSpecial, NegativeOnlyBlocks) {
  for (DType t : kBlockTypes) {
    auto x = gaussian(4 * block_size(t), 1.0f, 0, 7);
    for (auto& v : x) v = -std::fabs(v) - 0.01f;
    check_round_trip(t, x, "negative-only");
  }
}

TEST(QuantSpecial, HugeValuesSaturateInsteadOfInf) {
  for (DType t : kBlockTypes) {
    const int n = block_size(t);
    std::vector<float> x(2 * n);
    const float huge[] = {1e30f, -3e38f, 2e35f, -1e31f, 3.4e38f};
    for (int i = 0; i < n; ++i) x[i] = huge[i % 5];
    for (int i = n; i < 2 * n; ++i) x[i] = i % 3 ? 3.4e38f : 0.5f;
    x[0] = -3.4e38f;
    auto y = dequantize(t, quantize(t, x), x.size());
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << dtype_name(t) << " element " << i << " x " << x[i];
      // Saturation never flips the sign of a huge element (it may give 0 when the
      // element is tiny next to the block's largest, as rounding would anyway).
      if (std::fabs(x[i]) >= 1e30f && y[i] != 0) {
        ASSERT_EQ(std::signbit(y[i]), std::signbit(x[i]))
            << dtype_name(t) << " element " << i << " x " << x[i] << " y " << y[i];
      }
    }
  }
}

TEST(QuantSpecial, TinyValuesStayTinyAndFinite) {
  for (DType t : kBlockTypes) {
    for (float scale : {1e-30f, 1e-40f /* float subnormal */, 1e-9f}) {
      auto x = gaussian(2 * block_size(t), scale, 0, 3);
      auto y = dequantize(t, quantize(t, x), x.size());
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(std::isfinite(y[i])) << dtype_name(t);
        // These inputs are below fp16's smallest subnormal (2^-24 ~ 6e-8) or near it:
        // a block scale rounds to 0 (the block decodes to 0, error |x| <= ~4e-9) or
        // up to a few units of 2^-24 (error at most half such a step). 1e-7 bounds both.
        ASSERT_LE(std::fabs(y[i] - x[i]), 1e-7f) << dtype_name(t) << " scale " << scale;
      }
    }
  }
}

// --- layouts: hand-built blocks -----------------------------------------------------
//
// Each block sets a few bits at documented positions (ggml-common.h) and checks
// which elements they reach.

TEST(QuantLayout, LegacyBlocks) {
  {
    BlockQ4_0 b = {};
    b.d = f32_to_f16(0.5f);
    b.qs[3] = 0xA2;  // element 3: 2 - 8; element 19: 10 - 8
    std::vector<float> y(32);
    dequantize_row(DType::Q4_0, &b, y.data(), 32);
    EXPECT_EQ(y[3], -3.0f);
    EXPECT_EQ(y[19], 1.0f);
    EXPECT_EQ(y[4], -4.0f);  // level 0 is -8
  }
  {
    BlockQ4_1 b = {};
    b.d = f32_to_f16(0.5f), b.m = f32_to_f16(-1.0f);
    b.qs[15] = 0xF3;  // element 15: 3; element 31: 15
    std::vector<float> y(32);
    dequantize_row(DType::Q4_1, &b, y.data(), 32);
    EXPECT_EQ(y[15], 0.5f);
    EXPECT_EQ(y[31], 6.5f);
    EXPECT_EQ(y[0], -1.0f);
  }
  {
    BlockQ5_0 b = {};
    b.d = f32_to_f16(2.0f);
    b.qs[4] = 0x10;  // element 20 (high nibble of byte 4): low bits 1
    b.qh[2] = 0x10;  // bit 20 of qh: element 20's bit 4
    std::vector<float> y(32);
    dequantize_row(DType::Q5_0, &b, y.data(), 32);
    EXPECT_EQ(y[20], 2.0f * (17 - 16));
    EXPECT_EQ(y[4], 2.0f * (0 - 16));
  }
  {
    BlockQ5_1 b = {};
    b.d = f32_to_f16(1.0f), b.m = f32_to_f16(0.25f);
    b.qh[0] = 0x01;  // element 0's bit 4
    b.qs[0] = 0x02;  // element 0's low bits
    std::vector<float> y(32);
    dequantize_row(DType::Q5_1, &b, y.data(), 32);
    EXPECT_EQ(y[0], 18.25f);
    EXPECT_EQ(y[16], 0.25f);
  }
  {
    BlockQ8_1 b = {};
    b.d = f32_to_f16(2.0f), b.s = f32_to_f16(12345.0f);  // s does not affect decoding
    b.qs[31] = 100, b.qs[0] = -128;
    std::vector<float> y(32);
    dequantize_row(DType::Q8_1, &b, y.data(), 32);
    EXPECT_EQ(y[31], 200.0f);
    EXPECT_EQ(y[0], -256.0f);
  }
}

TEST(QuantLayout, KQuantBlocks) {
  std::vector<float> y(256);
  {
    BlockQ2_K b = {};
    b.d = f32_to_f16(2.0f), b.dmin = f32_to_f16(1.0f);
    b.scales[12] = 0x23;  // sub-block 12 (elements 192..207): sc 3, m 2
    b.qs[40] = 0x20;      // element 200 = 128 + 32 * 2 + 8: bits 4-5 of qs[32 + 8]
    dequantize_row(DType::Q2_K, &b, y.data(), 256);
    EXPECT_EQ(y[200], 2.0f * 3 * 2 - 1.0f * 2);
    EXPECT_EQ(y[201], -2.0f);
    EXPECT_EQ(y[0], 0.0f);
  }
  {
    BlockQ3_K b = {};
    b.d = f32_to_f16(0.5f);
    b.scales[4] = 0x05;  // field 4 (elements 64..79): low 4 bits 5
    b.scales[8] = 0x08;  // ... and its top 2 bits (bits 2-3 of byte 8): 37, scale 5
    b.qs[13] = 0x30;     // element 77 = 64 + 13: bits 4-5 of qs[13]: 3
    b.hmask[13] = 0x04;  // bit 77 / 32 = 2 of hmask[13]: set means no -4
    dequantize_row(DType::Q3_K, &b, y.data(), 256);
    EXPECT_EQ(y[77], 0.5f * 5 * 3);
    EXPECT_EQ(y[78], 0.5f * 5 * -4);   // hmask bit clear: level - 4
    EXPECT_EQ(y[0], 0.5f * -32 * -4);  // field 0: scale -32
  }
  {
    BlockQ4_K b = {};
    b.d = f32_to_f16(1.0f), b.dmin = f32_to_f16(0.5f);
    // Sub-block 5: scale 37 (0b10'0101), min 50 (0b11'0010).
    b.scales[9] = 0x25;  // low 4 bits of both
    b.scales[1] = 0x80;  // top 2 bits of the scale, in byte 5 - 4
    b.scales[5] = 0xC0;  // top 2 bits of the min, in byte 5
    b.qs[71] = 0x90;     // element 167 = 32 * 5 + 7: high nibble of qs[32 * 2 + 7]
    dequantize_row(DType::Q4_K, &b, y.data(), 256);
    EXPECT_EQ(y[167], 37.0f * 9 - 0.5f * 50);
    EXPECT_EQ(y[160], -25.0f);
    EXPECT_EQ(y[135], 0.0f);  // element 128 + 7 (sub-block 4, the low nibble of qs[71])
  }
  {
    BlockQ5_K b = {};
    b.d = f32_to_f16(1.0f), b.dmin = f32_to_f16(1.0f);
    b.scales[3] = 10, b.scales[7] = 4;  // sub-block 3: scale 10, min 4
    b.qs[36] = 0x60;                    // element 100 = 32 * 3 + 4: high nibble of qs[32 + 4]
    b.qh[4] = 0x08;                     // its bit 4: bit 3 of qh[4]
    dequantize_row(DType::Q5_K, &b, y.data(), 256);
    EXPECT_EQ(y[100], 10.0f * 22 - 4);
    EXPECT_EQ(y[101], -4.0f);
  }
  {
    BlockQ6_K b = {};
    b.d = f32_to_f16(0.25f);
    b.scales[12] = -3;  // elements 192..207
    b.ql[69] = 0x70;    // element 197 = 128 + 32 * 2 + 5: high nibble of ql[64 + 5]
    b.qh[37] = 0x20;    // its top 2 bits: bits 4-5 of qh[32 + 5]
    dequantize_row(DType::Q6_K, &b, y.data(), 256);
    EXPECT_EQ(y[197], 0.25f * -3 * (39 - 32));
    EXPECT_EQ(y[198], 0.25f * -3 * -32);
    EXPECT_EQ(y[133], 0.0f);  // low nibble of ql[69], scale 0
  }
  {
    BlockQ8_K b = {};
    b.d = 0.5f;
    b.qs[10] = -7;
    dequantize_row(DType::Q8_K, &b, y.data(), 256);
    EXPECT_EQ(y[10], -3.5f);
    EXPECT_EQ(y[11], 0.0f);
  }
}

TEST(QuantLayout, ScalePackingRoundTrips) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    uint8_t sc[8], m[8], packed[12];
    for (int j = 0; j < 8; ++j) sc[j] = rng() % 64, m[j] = rng() % 64;
    pack_k4_scales_mins(sc, m, packed);
    for (int j = 0; j < 8; ++j) {
      uint8_t s2, m2;
      unpack_k4_scale_min(packed, j, s2, m2);
      ASSERT_EQ(s2, sc[j]);
      ASSERT_EQ(m2, m[j]);
    }
    uint8_t field[16];
    for (auto& f : field) f = rng() % 64;
    pack_q3k_scales(field, packed);
    for (int j = 0; j < 16; ++j) ASSERT_EQ(unpack_q3k_scale(packed, j), field[j]);
  }
}

// --- the extra fields -----------------------------------------------------------------

TEST(QuantFields, Q8_1SumField) {
  auto x = gaussian(4 * 32, 1.0f, 0.3f, 11);
  auto q = quantize(DType::Q8_1, x);
  for (int b = 0; b < 4; ++b) {
    BlockQ8_1 blk;
    std::memcpy(&blk, q.data() + b * sizeof blk, sizeof blk);
    int sum = 0;
    for (int8_t v : blk.qs) sum += v;
    // s = fp16(d * sum) with GGML's unrounded d = absmax / 127: compare with the
    // stored fp16 d (2^-11 relative apart) plus s's own fp16 rounding (2^-11).
    const float d16 = f16_to_f32(blk.d), s = f16_to_f32(blk.s);
    EXPECT_NEAR(s, d16 * sum, std::fabs(d16 * sum) * 3 * kHalfRel) << "block " << b;
  }
}

// --- idempotence -----------------------------------------------------------------------

// Re-quantizing decoded Q8_0/Q4_0/Q5_0 data gives the same bytes: the decoded
// block's largest element is exactly level * d16, so the new scale is d16 again
// (127 * d16 is exact in float, and division by a power of two or by 127 of an
// exact multiple is exact), and every element sits exactly on a level.
TEST(QuantIdempotence, SymmetricLegacyTypesRequantizeToTheSameBytes) {
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q8_1}) {
    auto x = gaussian(16 * 32, 2.0f, 0.1f, 21);
    auto q1 = quantize(t, x);
    auto q2 = quantize(t, dequantize(t, q1, x.size()));
    if (t == DType::Q8_1) {
      // s is computed from the unrounded d, which differs between the two passes.
      for (size_t b = 0; b < 16; ++b) {
        const size_t o = b * sizeof(BlockQ8_1);
        EXPECT_EQ(std::memcmp(q1.data() + o, q2.data() + o, 2), 0) << "d of block " << b;
        EXPECT_EQ(std::memcmp(q1.data() + o + 4, q2.data() + o + 4, 32), 0) << "block " << b;
      }
    } else {
      EXPECT_EQ(q1, q2) << dtype_name(t);
    }
  }
}

// Q8_K keeps a float scale 1 / (-127 / max): the second pass finds the same
// levels, and its d may differ from the first only in the last bit or so.
TEST(QuantIdempotence, Q8_KRequantizesToTheSameLevels) {
  auto x = gaussian(4 * 256, 1.0f, 0, 31);
  auto q1 = quantize(DType::Q8_K, x);
  auto q2 = quantize(DType::Q8_K, dequantize(DType::Q8_K, q1, x.size()));
  for (size_t b = 0; b < 4; ++b) {
    BlockQ8_K b1, b2;
    std::memcpy(&b1, q1.data() + b * sizeof b1, sizeof b1);
    std::memcpy(&b2, q2.data() + b * sizeof b2, sizeof b2);
    EXPECT_EQ(std::memcmp(b1.qs, b2.qs, sizeof b1.qs), 0) << "block " << b;
    EXPECT_NEAR(b1.d, b2.d, std::fabs(b1.d) * 4e-7) << "block " << b;  // ~2 float ulps
  }
}

// The decoded values of the K-quants are on their own grid, so quantizing them
// again cannot be worse than the first time: the second error bound still holds
// and the values barely move.
TEST(QuantIdempotence, KQuantsStayWithinTheirBound) {
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    auto x = gaussian(4 * 256, 1.0f, 0.2f, 41);
    auto y1 = dequantize(t, quantize(t, x), x.size());
    check_round_trip(t, y1, "re-quantized");
  }
}

// --- bounds of memory and errors --------------------------------------------------------

TEST(QuantSafety, WritesOnlyTheRowsBlocks) {
  for (DType t : kBlockTypes) {
    const int n = 3 * block_size(t);
    auto x = gaussian(n, 1.0f, 0, 51);
    const size_t bytes = dtype_row_bytes(t, n);
    std::vector<uint8_t> q(bytes + 64, 0xAB);
    quantize_row(t, x.data(), q.data(), n);
    for (size_t i = bytes; i < q.size(); ++i) ASSERT_EQ(q[i], 0xAB) << dtype_name(t);
    std::vector<float> y(n + 16, -7.0f);
    dequantize_row(t, q.data(), y.data(), n);
    for (size_t i = n; i < y.size(); ++i) ASSERT_EQ(y[i], -7.0f) << dtype_name(t);
    // Unaligned rows are fine (blocks are copied, not dereferenced in place).
    std::vector<uint8_t> shifted(bytes + 1);
    std::memcpy(shifted.data() + 1, q.data(), bytes);
    std::vector<float> y2(n);
    dequantize_row(t, shifted.data() + 1, y2.data(), n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(y2[i], y[i]) << dtype_name(t);
  }
  quantize_row(DType::Q4_0, nullptr, nullptr, 0);  // an empty row touches nothing
  dequantize_row(DType::F32, nullptr, nullptr, 0);
}

TEST(QuantSafety, BadArgumentsAreClearErrors) {
  std::vector<uint8_t> buf(1024);
  std::vector<float> f(256, 1.0f);
  try {
    dequantize_row(DType::Q4_K, buf.data(), f.data(), 33);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Q4_K"), std::string::npos) << msg;
    EXPECT_NE(msg.find("33"), std::string::npos) << msg;
  }
  f[5] = NAN;
  try {
    quantize_row(DType::Q8_0, f.data(), buf.data(), 32);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element 5"), std::string::npos) << e.what();
  }
  f[5] = INFINITY;
  EXPECT_THROW(quantize_row(DType::Q6_K, f.data(), buf.data(), 256), Error);
  // The float conversions carry inf and NaN through.
  EXPECT_NO_THROW(quantize_row(DType::F16, f.data(), buf.data(), 256));
  EXPECT_THROW(dequantize_row(static_cast<DType>(99), buf.data(), f.data(), 32), Error);
}

TEST(Quants, HalfRowsHaveTheBitsOfTheScalarConversion) {
  // The vector conversion (F16C where present) must give f32_to_f16's bits for
  // every input: rounding to nearest even (halfway cases both ways), subnormals,
  // overflow to inf at 65520, NaN quiet with sign and top payload. Written at an
  // odd address, with a length that leaves a scalar tail.
  std::vector<uint32_t> bits = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                                0xFFC12345, 0x7F800001, 0x7FA00000, 0x477FE000, 0x477FEFFF,
                                0x477FF000, 0x477FF001, 0x33800000, 0x33000000, 0x33000001,
                                0x38800000, 0x387FE000, 0x3F801000, 0x3F803000, 0x3F800FFF};
  std::mt19937 rng(5);
  for (int i = 0; i < 4000; ++i) bits.push_back(rng());  // every exponent, NaNs included
  for (float scale : {1e-8f, 1e-5f, 1.0f, 3e4f, 7e4f}) {
    std::normal_distribution<float> normal(0.0f, scale);
    for (int i = 0; i < 500; ++i) {
      const float f = normal(rng);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      bits.push_back(u);
    }
  }
  bits.push_back(0x3F800000);  // an odd count: a scalar tail
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  std::vector<uint8_t> out(2 * x.size() + 1);
  f32_to_f16_row(x.data(), out.data() + 1, static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, out.data() + 1 + 2 * i, 2);
    ASSERT_EQ(h, f32_to_f16(x[i])) << "input bits 0x" << std::hex << bits[i];
  }
}
