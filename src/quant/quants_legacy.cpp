// The legacy 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
//
// Quantization is GGML's reference round-to-nearest (quantize_row_*_ref): the
// same float operations in the same order, so for finite inputs whose scales fit
// in fp16 the bytes equal GGML's and gguf-py's. Two deliberate differences, both
// where GGML would store garbage: a scale beyond the fp16 range saturates at 65504
// (GGML stores inf, and the block decodes to inf/NaN) and the levels are clamped
// to that saturated scale; and a block whose fp16 scale rounds to zero gets the
// levels of an all-zero block (it decodes to zeros either way).
#include <cmath>
#include <cstring>

#include "quant/quant_blocks.h"
#include "quant/quants.h"

// Dequantization must round each product before the add, as GGML's C reference
// and numpy do; keep the compiler from fusing a * b + c into one FMA (GCC would
// under -march=native, its default being -ffp-contract=fast).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tandem::quant_detail {
namespace {

// A block scale d as GGML computes it, clamped to the fp16 range (`value`), its
// stored fp16 bits, and the inverse that picks the levels (0 when the stored
// scale is 0, so levels stay finite).
struct Scale {
  float value;
  uint16_t bits;
  float inv;
};

Scale make_scale(float d) {
  float value = d > kF16Max ? kF16Max : (d < -kF16Max ? -kF16Max : d);
  uint16_t bits = f32_to_f16(value);
  return {value, bits, f16_to_f32(bits) == 0.0f ? 0.0f : 1.0f / value};
}

// Q4_1/Q5_1 level offset: GGML's min; but when the block's range exceeds fp16
// and its scales saturated, the stored (saturated) min, so that every x still
// goes to the nearest value the block can represent.
float level_offset(float min, float d, uint16_t stored_min) {
  const bool saturated = std::fabs(min) > kF16Max || !(std::fabs(d) <= kF16Max);
  return saturated ? f16_to_f32(stored_min) : min;
}

// The element of largest magnitude, with its sign (the first one on ties).
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, float& min, float& max) {
  min = x[0];
  max = x[0];
  for (int j = 1; j < kQK; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

// Low 4 bits of the 32 levels q into qs (element j low nibble of qs[j], j + 16
// high nibble) and bit 4 into the little-endian 32-bit qh (bit j for element j).
void pack_nibbles(const int q[kQK], uint8_t qs[kQK / 2]) {
  for (int j = 0; j < kQK / 2; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + kQK / 2] & 0xF) << 4));
}
void pack_high_bits(const int q[kQK], uint8_t qh[4]) {
  uint32_t bits = 0;
  for (int j = 0; j < kQK; ++j) bits |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &bits, 4);
}
// The 5-bit level of element j from the nibbles and qh.
int level5(const uint8_t qs[kQK / 2], uint32_t qh, int j) {
  int low = j < kQK / 2 ? qs[j] & 0xF : qs[j - kQK / 2] >> 4;
  return low | static_cast<int>(((qh >> j) & 1) << 4);
}

}  // namespace

// Q4_0 (18 bytes): fp16 d | 16 bytes of 4-bit levels q. x = (q - 8) * d.
// d = max / -8 where max is the signed element of largest magnitude, so it maps
// to level 0; q = trunc(x / d + 8.5), clamped to 15.
void quantize_q4_0(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    Scale s = make_scale(signed_absmax(x) / -8);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = clamp_trunc(x[j] * s.inv + 8.5f, 0, 15);
    BlockQ4_0 b;
    b.d = s.bits;
    pack_nibbles(q, b.qs);
    store_block(b, dst, i);
  }
}

void dequantize_q4_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ4_0>(src, i);
    const float d = f16_to_f32(b.d);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b.qs[j] & 0xF) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  }
}

// Q4_1 (20 bytes): fp16 d | fp16 m | 16 bytes of 4-bit levels. x = q * d + m.
// m = min, d = (max - min) / 15, q = trunc((x - min) / d + 0.5), clamped to 15.
void quantize_q4_1(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / 15;
    Scale s = make_scale(d);
    const uint16_t m = f16_saturated(min);
    const float offset = level_offset(min, d, m);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = clamp_trunc((x[j] - offset) * s.inv + 0.5f, 0, 15);
    BlockQ4_1 b;
    b.d = s.bits;
    b.m = m;
    pack_nibbles(q, b.qs);
    store_block(b, dst, i);
  }
}

void dequantize_q4_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ4_1>(src, i);
    const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b.qs[j] & 0xF) * d + m;
      y[j + kQK / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  }
}

// Q5_0 (22 bytes): fp16 d | 4 bytes qh (bit 4 of each level) | 16 bytes of low
// nibbles. x = (q - 16) * d; d = max / -16, q = trunc(x / d + 16.5), clamped to 31.
void quantize_q5_0(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    Scale s = make_scale(signed_absmax(x) / -16);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = clamp_trunc(x[j] * s.inv + 16.5f, 0, 31);
    BlockQ5_0 b;
    b.d = s.bits;
    pack_high_bits(q, b.qh);
    pack_nibbles(q, b.qs);
    store_block(b, dst, i);
  }
}

void dequantize_q5_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ5_0>(src, i);
    const float d = f16_to_f32(b.d);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(level5(b.qs, qh, j) - 16) * d;
  }
}

// Q5_1 (24 bytes): fp16 d | fp16 m | 4 bytes qh | 16 bytes of low nibbles.
// x = q * d + m; m = min, d = (max - min) / 31, q = trunc((x - min) / d + 0.5).
void quantize_q5_1(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    float min, max;
    min_max(x, min, max);
    const float d = (max - min) / 31;
    Scale s = make_scale(d);
    const uint16_t m = f16_saturated(min);
    const float offset = level_offset(min, d, m);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = clamp_trunc((x[j] - offset) * s.inv + 0.5f, 0, 31);
    BlockQ5_1 b;
    b.d = s.bits;
    b.m = m;
    pack_high_bits(q, b.qh);
    pack_nibbles(q, b.qs);
    store_block(b, dst, i);
  }
}

void dequantize_q5_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ5_1>(src, i);
    const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
    uint32_t qh;
    std::memcpy(&qh, b.qh, 4);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(level5(b.qs, qh, j)) * d + m;
  }
}

// Q8_0 (34 bytes): fp16 d | 32 int8 levels. x = q * d; d = absmax / 127,
// q = round(x / d) (half away from zero).
void quantize_q8_0(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    Scale s = make_scale(std::fabs(signed_absmax(x)) / 127);
    BlockQ8_0 b;
    b.d = s.bits;
    for (int j = 0; j < kQK; ++j)
      b.qs[j] = static_cast<int8_t>(clamp_trunc(std::round(x[j] * s.inv), -127, 127));
    store_block(b, dst, i);
  }
}

void dequantize_q8_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ8_0>(src, i);
    const float d = f16_to_f32(b.d);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  }
}

// Q8_1 (36 bytes): fp16 d | fp16 s | 32 int8 levels. As Q8_0, plus s = d * sum(q)
// (with the unrounded d), which dot products with Q4_1/Q5_1 use for the offset.
void quantize_q8_1(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK;
    Scale s = make_scale(std::fabs(signed_absmax(x)) / 127);
    BlockQ8_1 b;
    b.d = s.bits;
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      b.qs[j] = static_cast<int8_t>(clamp_trunc(std::round(x[j] * s.inv), -127, 127));
      sum += b.qs[j];
    }
    b.s = f16_saturated(static_cast<float>(sum) * s.value);
    store_block(b, dst, i);
  }
}

void dequantize_q8_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ8_1>(src, i);
    const float d = f16_to_f32(b.d);
    float* y = dst + i * kQK;
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  }
}

}  // namespace tandem::quant_detail
