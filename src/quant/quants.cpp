// f16/bf16 conversions, the plain float types, and the dispatch of
// dequantize_row/quantize_row to the per-type block code (quants_legacy.cpp for
// the 32-element blocks, quants_k.cpp for the K-quants).
#include "quant/quants.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "quant/quant_blocks.h"

namespace tandem {
namespace {

uint32_t float_bits(float f) { return std::bit_cast<uint32_t>(f); }
float bits_float(uint32_t u) { return std::bit_cast<float>(u); }

// Round the integer m right by `shift` bits (1..31), to nearest, ties to even.
uint32_t shift_round_even(uint32_t m, int shift) {
  uint32_t kept = m >> shift;
  uint32_t rest = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) ++kept;
  return kept;
}

}  // namespace

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Every half is
// exactly representable as a float.
float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000 | (mant << 13));  // inf, nan
  if (exp == 0) {                                                        // zero, subnormal
    float v = static_cast<float>(mant) * 0x1p-24f;                       // exact
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

// Round to nearest, ties to even; overflow gives inf, NaN stays NaN (quieted,
// sign and top payload bits kept, as x86's F16C does).
uint16_t f32_to_f16(float f) {
  uint32_t u = float_bits(f);
  auto sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  uint32_t a = u & 0x7FFFFFFF;
  if (a > 0x7F800000) return static_cast<uint16_t>(sign | 0x7E00 | ((a >> 13) & 0x3FF));
  int e = static_cast<int>(a >> 23) - 127;  // unbiased exponent
  uint32_t mant = a & 0x7FFFFF;
  if (e > 15) return sign | 0x7C00;  // >= 65536 (or inf): inf
  if (e >= -14) {
    // Normal range. A carry out of the mantissa bumps the exponent, up to inf.
    uint32_t h = (static_cast<uint32_t>(e + 15) << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1FFF;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (e < -25) return sign;  // below half the smallest subnormal (2^-24): zero
  // Subnormal half: count units of 2^-24. The float is (mant | 2^23) * 2^(e-23),
  // i.e. (mant | 2^23) >> -(e+1) units; rounding up may reach the smallest normal.
  uint32_t m = mant | 0x800000;
  return static_cast<uint16_t>(sign | shift_round_even(m, -(e + 1)));
}

float bf16_to_f32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// As GGML: NaN keeps its sign and top payload and is made quiet; everything else
// rounds to nearest even (huge finite values may round up to inf).
uint16_t f32_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

namespace quant_detail {

uint16_t f16_saturated(float x) {
  if (x > kF16Max) x = kF16Max;
  if (x < -kF16Max) x = -kF16Max;
  return f32_to_f16(x);
}

uint16_t f16_at_least(float x) {
  if (!(x > 0)) return 0;
  if (x >= kF16Max) return f32_to_f16(kF16Max);
  uint16_t h = f32_to_f16(x);
  if (f16_to_f32(h) < x) ++h;  // next half up: positive halves order like their bits
  return h;
}

int clamp_trunc(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

}  // namespace quant_detail

namespace {

int64_t block_count(DType t, int64_t n, const char* what) {
  const auto& info = dtype_info(t);
  check(n >= 0 && n % info.block_size == 0,
        "{}: {} row of {} elements is not a multiple of the block size {}", what, info.name, n,
        info.block_size);
  return n / info.block_size;
}

// The block types quantize with a per-block scale: a NaN or inf input has no
// meaningful encoding (it would poison the whole block), so reject it clearly.
void check_finite(DType t, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(src[i]))
      fail("quantize_row: {} input element {} is {} (only finite values can be quantized)",
           dtype_name(t), i, src[i]);
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  using namespace quant_detail;
  const int64_t nb = block_count(t, n, "dequantize_row");
  if (n == 0) return;
  const auto* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::F32:
      std::memcpy(dst, s, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    case DType::Q4_0:
      return dequantize_q4_0(s, dst, nb);
    case DType::Q4_1:
      return dequantize_q4_1(s, dst, nb);
    case DType::Q5_0:
      return dequantize_q5_0(s, dst, nb);
    case DType::Q5_1:
      return dequantize_q5_1(s, dst, nb);
    case DType::Q8_0:
      return dequantize_q8_0(s, dst, nb);
    case DType::Q8_1:
      return dequantize_q8_1(s, dst, nb);
    case DType::Q2_K:
      return dequantize_q2_k(s, dst, nb);
    case DType::Q3_K:
      return dequantize_q3_k(s, dst, nb);
    case DType::Q4_K:
      return dequantize_q4_k(s, dst, nb);
    case DType::Q5_K:
      return dequantize_q5_k(s, dst, nb);
    case DType::Q6_K:
      return dequantize_q6_k(s, dst, nb);
    case DType::Q8_K:
      return dequantize_q8_k(s, dst, nb);
  }
  fail("dequantize_row: unsupported tensor type id {}", static_cast<uint32_t>(t));
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  using namespace quant_detail;
  const int64_t nb = block_count(t, n, "quantize_row");
  if (n == 0) return;
  auto* d = static_cast<uint8_t*>(dst);
  if (dtype_is_quantized(t)) check_finite(t, src, n);
  switch (t) {
    case DType::F32:
      std::memcpy(d, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::F16:
      return f32_to_f16_row(src, d, n);  // vectorised, same bits
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(d + 2 * i, &h, 2);
      }
      return;
    case DType::Q4_0:
      return quantize_q4_0(src, d, nb);
    case DType::Q4_1:
      return quantize_q4_1(src, d, nb);
    case DType::Q5_0:
      return quantize_q5_0(src, d, nb);
    case DType::Q5_1:
      return quantize_q5_1(src, d, nb);
    case DType::Q8_0:
      return quantize_q8_0(src, d, nb);
    case DType::Q8_1:
      return quantize_q8_1(src, d, nb);
    case DType::Q2_K:
      return quantize_q2_k(src, d, nb);
    case DType::Q3_K:
      return quantize_q3_k(src, d, nb);
    case DType::Q4_K:
      return quantize_q4_k(src, d, nb);
    case DType::Q5_K:
      return quantize_q5_k(src, d, nb);
    case DType::Q6_K:
      return quantize_q6_k(src, d, nb);
    case DType::Q8_K:
      return quantize_q8_k(src, d, nb);
  }
  fail("quantize_row: unsupported tensor type id {}", static_cast<uint32_t>(t));
}

}  // namespace tandem
