// The K-quants: 256-element super-blocks split into 16 or 32-element sub-blocks,
// each with its own small integer scale (and min) times fp16 super-block scales.
//
// Dequantization follows GGML's dequantize_row_*_K operation for operation, so
// the floats are bit-identical. Quantization is a simple reference, not GGML's
// iterative search (make_qkx2_quants etc.):
//  - "affine" types (Q2_K, Q4_K, Q5_K; x = d*sc*q - dmin*m, q >= 0): per sub-block
//    take lo = min(0, min x) and hi = max x. The offset dmin*m is rounded *up* to
//    cover -lo, then the step d*sc is rounded *up* to cover hi + offset, so every x
//    falls inside the sub-block's grid and q = round((x + offset) / step) errs by at
//    most step / 2. dmin and d are fp16 values rounded up so the largest sub-block
//    fits the scale codes.
//  - "symmetric" types (Q3_K, Q6_K; x = d*sc*q, q in [-qneg, qpos]): per sub-block
//    the step is rounded up to cover max(hi / qpos, -lo / qneg); q = round(x / step).
//  - Q8_K: GGML's own reference (float scale; activations for dot products).
// Scales saturate at the largest half, so huge inputs clip instead of giving inf.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/quant_blocks.h"
#include "quant/quants.h"

// Each product must be rounded before the subtraction, as in GGML's C reference
// and numpy: no fusing into FMA (see quants_legacy.cpp).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tandem::quant_detail {
namespace {

constexpr int kMaxSub = 16;  // sub-blocks per super-block, at most

int clamp_round(float v, int lo, int hi) { return clamp_trunc(std::nearbyint(v), lo, hi); }
int ceil_code(float v, int code_max) { return clamp_trunc(std::ceil(v), 0, code_max); }

// Sub-block scales for x = d * sc[j] * q - dmin * m[j], q in [0, nmax], codes sc
// and m in [0, code_max]. step/offset are computed exactly as the decoder does.
struct AffineScales {
  uint16_t d = 0, dmin = 0;
  uint8_t sc[kMaxSub] = {}, m[kMaxSub] = {};
  float step[kMaxSub] = {}, offset[kMaxSub] = {};
};

AffineScales choose_affine_scales(const float* x, int n_sub, int nmax, int code_max) {
  const int len = kQK_K / n_sub;
  float lo[kMaxSub], hi[kMaxSub];
  float max_offset = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    lo[j] = 0.0f;
    hi[j] = x[j * len];
    for (int l = 0; l < len; ++l) {
      lo[j] = std::min(lo[j], x[j * len + l]);
      hi[j] = std::max(hi[j], x[j * len + l]);
    }
    max_offset = std::max(max_offset, -lo[j]);
  }
  AffineScales a;
  a.dmin = f16_at_least(max_offset / static_cast<float>(code_max));
  const float dmin = f16_to_f32(a.dmin);
  float need[kMaxSub], max_need = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    a.m[j] = static_cast<uint8_t>(dmin > 0 ? ceil_code(-lo[j] / dmin, code_max) : 0);
    a.offset[j] = dmin * static_cast<float>(a.m[j]);
    need[j] = std::max(0.0f, (hi[j] + a.offset[j]) / static_cast<float>(nmax));
    max_need = std::max(max_need, need[j]);
  }
  a.d = f16_at_least(max_need / static_cast<float>(code_max));
  const float d = f16_to_f32(a.d);
  for (int j = 0; j < n_sub; ++j) {
    a.sc[j] = static_cast<uint8_t>(d > 0 ? ceil_code(need[j] / d, code_max) : 0);
    a.step[j] = d * static_cast<float>(a.sc[j]);
  }
  return a;
}

// Levels 0..nmax of the 256 elements under affine scales.
void affine_levels(const float* x, const AffineScales& a, int n_sub, int nmax, int q[kQK_K]) {
  const int len = kQK_K / n_sub;
  for (int e = 0; e < kQK_K; ++e) {
    const int j = e / len;
    q[e] = a.step[j] > 0 ? clamp_round((x[e] + a.offset[j]) / a.step[j], 0, nmax) : 0;
  }
}

// Sub-block scales for x = d * sc[j] * q, q in [-qneg, qpos], sc in [0, code_max].
struct SymmetricScales {
  uint16_t d = 0;
  uint8_t sc[kMaxSub] = {};
  float step[kMaxSub] = {};
};

SymmetricScales choose_symmetric_scales(const float* x, int n_sub, int qneg, int qpos,
                                        int code_max) {
  const int len = kQK_K / n_sub;
  float need[kMaxSub], max_need = 0.0f;
  for (int j = 0; j < n_sub; ++j) {
    float lo = 0.0f, hi = 0.0f;
    for (int l = 0; l < len; ++l) {
      lo = std::min(lo, x[j * len + l]);
      hi = std::max(hi, x[j * len + l]);
    }
    need[j] = std::max(hi / static_cast<float>(qpos), -lo / static_cast<float>(qneg));
    max_need = std::max(max_need, need[j]);
  }
  SymmetricScales s;
  s.d = f16_at_least(max_need / static_cast<float>(code_max));
  const float d = f16_to_f32(s.d);
  for (int j = 0; j < n_sub; ++j) {
    s.sc[j] = static_cast<uint8_t>(d > 0 ? ceil_code(need[j] / d, code_max) : 0);
    s.step[j] = d * static_cast<float>(s.sc[j]);
  }
  return s;
}

void symmetric_levels(const float* x, const SymmetricScales& s, int n_sub, int qneg, int qpos,
                      int q[kQK_K]) {
  const int len = kQK_K / n_sub;
  for (int e = 0; e < kQK_K; ++e) {
    const int j = e / len;
    q[e] = s.step[j] > 0 ? clamp_round(x[e] / s.step[j], -qneg, qpos) : 0;
  }
}

// Q2_K/Q3_K pack 2-bit fields: element 128n + 32k + l goes to bits 2k..2k+1 of
// byte 32n + l. These give the byte and shift of element e.
int crumb_byte(int e) { return 32 * (e / 128) + e % 32; }
int crumb_shift(int e) { return 2 * ((e % 128) / 32); }

}  // namespace

// Q2_K (84 bytes): scales[16] (sc low nibble, m high) | qs[64] 2-bit levels |
// fp16 d | fp16 dmin. Sub-block j = elements 16j..16j+15:
// x = d * sc[j] * q - dmin * m[j].
void quantize_q2_k(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    AffineScales a = choose_affine_scales(x, 16, 3, 15);
    int q[kQK_K];
    affine_levels(x, a, 16, 3, q);
    BlockQ2_K b = {};
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(a.sc[j] | (a.m[j] << 4));
    for (int e = 0; e < kQK_K; ++e)
      b.qs[crumb_byte(e)] |= static_cast<uint8_t>(q[e] << crumb_shift(e));
    b.d = a.d;
    b.dmin = a.dmin;
    store_block(b, dst, i);
  }
}

void dequantize_q2_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ2_K>(src, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(b.scales[j] & 0xF);
      const float ml = dmin * static_cast<float>(b.scales[j] >> 4);
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int q = (b.qs[crumb_byte(e)] >> crumb_shift(e)) & 3;
        y[e] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

// Q3_K (110 bytes): hmask[32] | qs[64] low 2 bits | scales[12] (16 6-bit fields) |
// fp16 d. Level q in [-4, 3] is stored as q + 4: its low 2 bits in qs (packed as
// Q2_K), its bit 2 in hmask (bit e / 32 of hmask[e % 32]). Sub-block j of 16:
// x = d * (field[j] - 32) * q. This quantizer uses fields 32..63 (sc >= 0).
void quantize_q3_k(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    SymmetricScales s = choose_symmetric_scales(x, 16, 4, 3, 31);
    int q[kQK_K];
    symmetric_levels(x, s, 16, 4, 3, q);
    BlockQ3_K b = {};
    uint8_t field[16];
    for (int j = 0; j < 16; ++j) field[j] = static_cast<uint8_t>(s.sc[j] + 32);
    pack_q3k_scales(field, b.scales);
    for (int e = 0; e < kQK_K; ++e) {
      const int u = q[e] + 4;  // 0..7
      b.qs[crumb_byte(e)] |= static_cast<uint8_t>((u & 3) << crumb_shift(e));
      b.hmask[e % 32] |= static_cast<uint8_t>((u >> 2) << (e / 32));
    }
    b.d = s.d;
    store_block(b, dst, i);
  }
}

void dequantize_q3_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ3_K>(src, i);
    const float d = f16_to_f32(b.d);
    float* y = dst + i * kQK_K;
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(unpack_q3k_scale(b.scales, j) - 32);
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int low = (b.qs[crumb_byte(e)] >> crumb_shift(e)) & 3;
        const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
        y[e] = dl * static_cast<float>(low - (high ? 0 : 4));
      }
    }
  }
}

// Q4_K (144 bytes): fp16 d | fp16 dmin | scales[12] (8 6-bit scales + 8 6-bit
// mins) | qs[128]. Sub-block j = elements 32j..32j+31, its levels in the low
// (j even) or high (j odd) nibbles of qs[32(j/2)..]: x = d * sc[j] * q - dmin * m[j].
void quantize_q4_k(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    AffineScales a = choose_affine_scales(x, 8, 15, 63);
    int q[kQK_K];
    affine_levels(x, a, 8, 15, q);
    BlockQ4_K b = {};
    b.d = a.d;
    b.dmin = a.dmin;
    pack_k4_scales_mins(a.sc, a.m, b.scales);
    for (int e = 0; e < kQK_K; ++e) {
      const int j = e / 32;
      b.qs[32 * (j / 2) + e % 32] |= static_cast<uint8_t>(q[e] << (4 * (j % 2)));
    }
    store_block(b, dst, i);
  }
}

void dequantize_q4_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ4_K>(src, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_k4_scale_min(b.scales, j, sc, m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        const int q = (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        y[32 * j + l] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

// Q5_K (176 bytes): fp16 d | fp16 dmin | scales[12] (as Q4_K) | qh[32] | qs[128].
// As Q4_K with 5-bit levels: bit 4 of element 32j + l is bit j of qh[l].
void quantize_q5_k(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    AffineScales a = choose_affine_scales(x, 8, 31, 63);
    int q[kQK_K];
    affine_levels(x, a, 8, 31, q);
    BlockQ5_K b = {};
    b.d = a.d;
    b.dmin = a.dmin;
    pack_k4_scales_mins(a.sc, a.m, b.scales);
    for (int e = 0; e < kQK_K; ++e) {
      const int j = e / 32, l = e % 32;
      b.qs[32 * (j / 2) + l] |= static_cast<uint8_t>((q[e] & 0xF) << (4 * (j % 2)));
      b.qh[l] |= static_cast<uint8_t>((q[e] >> 4) << j);
    }
    store_block(b, dst, i);
  }
}

void dequantize_q5_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ5_K>(src, i);
    const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
    float* y = dst + i * kQK_K;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_k4_scale_min(b.scales, j, sc, m);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        const int q = low | (((b.qh[l] >> j) & 1) << 4);
        y[32 * j + l] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

// Q6_K (210 bytes): ql[128] low 4 bits | qh[64] high 2 bits | int8 scales[16] |
// fp16 d. Level q in [-32, 31] stored as q + 32. Element 128n + 32k + l: low
// bits in ql[64n + 32(k % 2) + l] (low nibble for k < 2, high for k >= 2), high
// bits at 2k of qh[32n + l]. Sub-block j of 16: x = d * scales[j] * q.
void quantize_q6_k(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    SymmetricScales s = choose_symmetric_scales(x, 16, 32, 31, 127);
    int q[kQK_K];
    symmetric_levels(x, s, 16, 32, 31, q);
    BlockQ6_K b = {};
    for (int e = 0; e < kQK_K; ++e) {
      const int n = e / 128, k = (e % 128) / 32, l = e % 32;
      const int u = q[e] + 32;  // 0..63
      b.ql[64 * n + 32 * (k % 2) + l] |= static_cast<uint8_t>((u & 0xF) << (4 * (k / 2)));
      b.qh[32 * n + l] |= static_cast<uint8_t>((u >> 4) << (2 * k));
    }
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(s.sc[j]);
    b.d = s.d;
    store_block(b, dst, i);
  }
}

void dequantize_q6_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ6_K>(src, i);
    const float d = f16_to_f32(b.d);
    float* y = dst + i * kQK_K;
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(b.scales[j]);
      for (int e = 16 * j; e < 16 * j + 16; ++e) {
        const int n = e / 128, k = (e % 128) / 32, l = e % 32;
        const int low = (b.ql[64 * n + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
        const int high = (b.qh[32 * n + l] >> (2 * k)) & 3;
        y[e] = dl * static_cast<float>((low | (high << 4)) - 32);
      }
    }
  }
}

// Q8_K (292 bytes): float d | 256 int8 levels | int16 bsums[16] (sums of 16
// levels). x = d * q. GGML's reference: the signed element of largest magnitude
// maps to -127, q = round-half-even(x * -127 / max). A block whose max is so small
// that 127 / max overflows (|max| < ~4e-37) is stored as zeros.
void quantize_q8_k(const float* src, uint8_t* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + i * kQK_K;
    float amax = 0.0f, max = 0.0f;
    for (int e = 0; e < kQK_K; ++e) {
      if (std::fabs(x[e]) > amax) {
        amax = std::fabs(x[e]);
        max = x[e];
      }
    }
    BlockQ8_K b = {};
    const float iscale = amax > 0 ? -127.0f / max : 0.0f;
    if (std::isfinite(iscale) && iscale != 0.0f) {
      for (int e = 0; e < kQK_K; ++e)
        b.qs[e] = static_cast<int8_t>(clamp_round(iscale * x[e], -128, 127));
      for (int j = 0; j < 16; ++j) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += b.qs[16 * j + l];
        b.bsums[j] = static_cast<int16_t>(sum);
      }
      b.d = 1 / iscale;
    }
    store_block(b, dst, i);
  }
}

void dequantize_q8_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    auto b = load_block<BlockQ8_K>(src, i);
    float* y = dst + i * kQK_K;
    for (int e = 0; e < kQK_K; ++e) y[e] = b.d * static_cast<float>(b.qs[e]);
  }
}

}  // namespace tandem::quant_detail
