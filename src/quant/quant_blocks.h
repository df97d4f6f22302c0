// Private to the quantization code and its tests: GGML's block structs (the
// on-disk layout of one block of each quantized type), the packing of the K-quant
// sub-block scales, and the per-type row functions that quants.cpp dispatches to.
//
// Layouts are GGML's (ggml-common.h). Multi-byte fields are little-endian; fp16
// fields are stored as raw uint16 bits. The row functions copy each block through
// a local struct with memcpy, so rows need no particular alignment.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>

namespace tandem::quant_detail {

static_assert(std::endian::native == std::endian::little,
              "the block structs mirror GGML's little-endian layout");

constexpr int kQK = 32;     // elements per block of the legacy types
constexpr int kQK_K = 256;  // elements per super-block of the K-quants

// --- legacy 32-element blocks --------------------------------------------------

struct BlockQ4_0 {  // x = d * (q - 8), q in [0, 15]
  uint16_t d;
  uint8_t qs[kQK / 2];  // element j in the low nibble of qs[j], j + 16 in the high
};
struct BlockQ4_1 {  // x = d * q + m, q in [0, 15]
  uint16_t d, m;
  uint8_t qs[kQK / 2];  // as Q4_0
};
struct BlockQ5_0 {  // x = d * (q - 16), q in [0, 31]
  uint16_t d;
  uint8_t qh[4];        // bit j of the little-endian uint32: bit 4 of q[j]
  uint8_t qs[kQK / 2];  // low 4 bits, as Q4_0
};
struct BlockQ5_1 {  // x = d * q + m, q in [0, 31]
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];  // as Q5_0
};
struct BlockQ8_0 {  // x = d * q
  uint16_t d;
  int8_t qs[kQK];
};
struct BlockQ8_1 {  // x = d * q; s = d * sum(q) (used by dot products, not decoding)
  uint16_t d, s;
  int8_t qs[kQK];
};

// --- K-quants: 256-element super-blocks of 16 or 32-element sub-blocks ---------

struct BlockQ2_K {             // x = d * sc[j] * q - dmin * m[j], q in [0, 3], 16 sub-blocks of 16
  uint8_t scales[kQK_K / 16];  // sc[j] in the low nibble, m[j] in the high nibble
  uint8_t qs[kQK_K / 4];       // element 128n + 32k + l: bits 2k..2k+1 of qs[32n + l]
  uint16_t d, dmin;
};
struct BlockQ3_K {           // x = d * (sc[j] - 32) * q, q in [-4, 3], 16 sub-blocks of 16
  uint8_t hmask[kQK_K / 8];  // element e: bit e / 32 of hmask[e % 32]; set: q >= 0
  uint8_t qs[kQK_K / 4];     // low 2 bits of q + 4, packed as Q2_K
  uint8_t scales[12];        // 16 6-bit scales: see pack/unpack_q3k_scale
  uint16_t d;
};
struct BlockQ4_K {  // x = d * sc[j] * q - dmin * m[j], q in [0, 15], 8 sub-blocks of 32
  uint16_t d, dmin;
  uint8_t scales[12];     // 8 6-bit scales and 8 6-bit mins: see unpack_k4_scale_min
  uint8_t qs[kQK_K / 2];  // element 64c + l: low nibble of qs[32c + l], 64c + 32 + l: high
};
struct BlockQ5_K {  // x = d * sc[j] * q - dmin * m[j], q in [0, 31], 8 sub-blocks of 32
  uint16_t d, dmin;
  uint8_t scales[12];     // as Q4_K
  uint8_t qh[kQK_K / 8];  // bit 4 of element 64c + l: bit 2c of qh[l]; of 64c + 32 + l: 2c + 1
  uint8_t qs[kQK_K / 2];  // low 4 bits, as Q4_K
};
struct BlockQ6_K {        // x = d * sc[j] * (q - 32), q in [0, 63], 16 sub-blocks of 16
  uint8_t ql[kQK_K / 2];  // element 128n + 32k + l, low 4 bits: ql[64n + 32(k%2) + l],
                          // the low nibble for k < 2, the high nibble for k >= 2
  uint8_t qh[kQK_K / 4];  // its high 2 bits: bits 2k..2k+1 of qh[32n + l]
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
struct BlockQ8_K {  // x = d * q; bsums[j] = sum of q over elements 16j..16j+15
  float d;          // a full float, unlike the other types
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// --- K-quant scale packing -----------------------------------------------------

// Q4_K/Q5_K: sub-block j's 6-bit scale and min. Bytes 0-3 hold sc[0..3] in their low
// 6 bits, bytes 4-7 m[0..3]; for j >= 4 the low 4 bits sit in byte j + 4 (scale in
// the low nibble, min in the high one) and the top 2 bits in the spare top bits of
// bytes j - 4 (scale) and j (min).
inline void unpack_k4_scale_min(const uint8_t* s, int j, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
inline void pack_k4_scales_mins(const uint8_t sc[8], const uint8_t m[8], uint8_t s[12]) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

// Q3_K: the 6-bit field of sub-block j (its scale is the field minus 32). The low
// 4 bits are the low nibble of byte j (j < 8) or the high nibble of byte j - 8; the
// top 2 bits are bits 2(j / 4)..2(j / 4) + 1 of byte 8 + j % 4.
inline int unpack_q3k_scale(const uint8_t* s, int j) {
  int low = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
  int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}
inline void pack_q3k_scales(const uint8_t field[16], uint8_t s[12]) {
  for (int i = 0; i < 12; ++i) s[i] = 0;
  for (int j = 0; j < 16; ++j) {
    s[j % 8] |= static_cast<uint8_t>((field[j] & 0xF) << (j < 8 ? 0 : 4));
    s[8 + j % 4] |= static_cast<uint8_t>((field[j] >> 4) << (2 * (j / 4)));
  }
}

// --- per-type rows (nb blocks) ---------------------------------------------------

void dequantize_q4_0(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q4_1(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q5_0(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q5_1(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q8_0(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q8_1(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q2_k(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q3_k(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q4_k(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q5_k(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q6_k(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q8_k(const uint8_t* src, float* dst, int64_t nb);

// Inputs must be finite (quantize_row checks).
void quantize_q4_0(const float* src, uint8_t* dst, int64_t nb);
void quantize_q4_1(const float* src, uint8_t* dst, int64_t nb);
void quantize_q5_0(const float* src, uint8_t* dst, int64_t nb);
void quantize_q5_1(const float* src, uint8_t* dst, int64_t nb);
void quantize_q8_0(const float* src, uint8_t* dst, int64_t nb);
void quantize_q8_1(const float* src, uint8_t* dst, int64_t nb);
void quantize_q2_k(const float* src, uint8_t* dst, int64_t nb);
void quantize_q3_k(const float* src, uint8_t* dst, int64_t nb);
void quantize_q4_k(const float* src, uint8_t* dst, int64_t nb);
void quantize_q5_k(const float* src, uint8_t* dst, int64_t nb);
void quantize_q6_k(const float* src, uint8_t* dst, int64_t nb);
void quantize_q8_k(const float* src, uint8_t* dst, int64_t nb);

// --- helpers shared by the quantizers --------------------------------------------

// Block i of a row, copied out (rows need no alignment) / copied in.
template <typename Block>
Block load_block(const uint8_t* src, int64_t i) {
  Block b;
  std::memcpy(&b, src + i * static_cast<int64_t>(sizeof(Block)), sizeof(Block));
  return b;
}
template <typename Block>
void store_block(const Block& b, uint8_t* dst, int64_t i) {
  std::memcpy(dst + i * static_cast<int64_t>(sizeof(Block)), &b, sizeof(Block));
}

constexpr float kF16Max = 65504.0f;  // largest finite half

// fp16 bits of x clamped to the finite half range: huge inputs saturate the
// stored scale instead of turning it into inf.
uint16_t f16_saturated(float x);
// The smallest non-negative half >= x (x >= 0), saturating at kF16Max. K-quant
// super-block scales round up so that every sub-block's needed step fits the
// 4/6/8-bit scale codes.
uint16_t f16_at_least(float x);
// v clamped to [lo, hi] and truncated toward zero; NaN gives lo.
int clamp_trunc(float v, int lo, int hi);

}  // namespace tandem::quant_detail
