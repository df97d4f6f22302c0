// Decoding the device weight layout (weight_layout.h), 32 elements at a time:
// the one definition that the CUDA kernels run on the device and the layout
// tests run on the host, so that what the tests check is what the kernels do.
//
// A group is 32 consecutive elements of a row: a whole block of the legacy
// types, one of the 8 sub-blocks of a K-quant super-block, 32 values of a float
// row. Each function computes exactly the float operations of the quant layer's
// reference dequantization (quants_legacy.cpp, quants_k.cpp), in the same
// order, so that on the host it gives the same bits; the kernels are compiled
// with -fmad=false so that nvcc does not fuse them either (cmake/TandemCuda.cmake).
// A host file that includes this header must keep the compiler from fusing too
// (`#pragma GCC optimize("fp-contract=off")`, as the quant layer does).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "cuda/host_device.h"

namespace tandem::cuda {

constexpr int kGroup = 32;     // elements of one decoded group
constexpr int kMaxPlanes = 4;  // block fields of the richest type (Q5_K, Q6_K)
constexpr int kKGroups = 8;    // groups of a K-quant super-block (256 elements)

// Where the planes of one matrix lie (device or host memory): plane p holds
// field p of every block, row after row, field_bytes[p] bytes each. Passed to
// kernels by value.
struct WeightPlanes {
  const uint8_t* plane[kMaxPlanes];
  int field_bytes[kMaxPlanes];
  int64_t blocks_per_row;

  TANDEM_HD const uint8_t* field(int p, int64_t row, int64_t block) const {
    return plane[p] + (row * blocks_per_row + block) * field_bytes[p];
  }
};

// Loads from a plane. Every field starts at a multiple of its own alignment
// (weight_layout.cpp orders the fields so), so the device loads whole words;
// the host copies bytes (no alignment assumed, no aliasing).
TANDEM_HD uint32_t load_u32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
TANDEM_HD uint16_t load_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}
TANDEM_HD float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// IEEE half to float, exact (every half is a float): the quant layer's f16_to_f32.
TANDEM_HD float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0x1F) return bits_to_float(sign | 0x7F800000 | (mant << 13));
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 0x1p-24f;  // subnormal: exact
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}
TANDEM_HD float bf16_bits_to_float(uint16_t h) {
  return bits_to_float(static_cast<uint32_t>(h) << 16);
}

// Byte i (0..15) of 16 bytes held as four little-endian words.
TANDEM_HD int byte_of(const uint32_t w[4], int i) { return (w[i / 4] >> (8 * (i % 4))) & 0xFF; }
TANDEM_HD void load_16_bytes(const uint8_t* p, uint32_t w[4]) {
  for (int i = 0; i < 4; ++i) w[i] = load_u32(p + 4 * i);
}

// Q4_K/Q5_K sub-block j's 6-bit scale and min from the 12 packed bytes (GGML's
// packing: j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split between
// byte j + 4 and the top 2 bits of bytes j - 4 and j).
TANDEM_HD void k4_scale_min(const uint8_t* s, int j, int& sc, int& m) {
  uint32_t w[3];
  for (int i = 0; i < 3; ++i) w[i] = load_u32(s + 4 * i);
  auto b = [&](int i) { return static_cast<int>((w[i / 4] >> (8 * (i % 4))) & 0xFF); };
  if (j < 4) {
    sc = b(j) & 63;
    m = b(j + 4) & 63;
  } else {
    sc = (b(j + 4) & 0xF) | ((b(j - 4) >> 6) << 4);
    m = (b(j + 4) >> 4) | ((b(j) >> 6) << 4);
  }
}

// The 32 floats of group g of row r, type T. Field order per type: see
// weight_layout.cpp (block_fields).
template <DType T>
TANDEM_HD void decode_group(const WeightPlanes& w, int64_t r, int64_t g, float out[kGroup]) {
  if constexpr (T == DType::F32) {
    const uint8_t* p = w.field(0, r, g);
    for (int l = 0; l < kGroup; ++l) out[l] = bits_to_float(load_u32(p + 4 * l));
  } else if constexpr (T == DType::F16 || T == DType::BF16) {
    const uint8_t* p = w.field(0, r, g);
    for (int l = 0; l < kGroup; l += 2) {
      const uint32_t pair = load_u32(p + 2 * l);
      const auto lo = static_cast<uint16_t>(pair & 0xFFFF), hi = static_cast<uint16_t>(pair >> 16);
      out[l] = T == DType::F16 ? half_bits_to_float(lo) : bf16_bits_to_float(lo);
      out[l + 1] = T == DType::F16 ? half_bits_to_float(hi) : bf16_bits_to_float(hi);
    }
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q5_0) {
    // Fields: Q4_0 d | qs; Q4_1 d,m | qs; Q5_0 d | qh | qs. Element j: low nibble
    // of qs[j] (j < 16) or high nibble of qs[j - 16]; Q5_0's bit 4 is bit j of qh.
    const uint8_t* head = w.field(0, r, g);
    const float d = half_bits_to_float(load_u16(head));
    const float m = T == DType::Q4_1 ? half_bits_to_float(load_u16(head + 2)) : 0.0f;
    const uint32_t qh = T == DType::Q5_0 ? load_u32(w.field(1, r, g)) : 0;
    uint32_t qs[4];
    load_16_bytes(w.field(T == DType::Q5_0 ? 2 : 1, r, g), qs);
    for (int j = 0; j < kGroup; ++j) {
      const int nibble = j < 16 ? byte_of(qs, j) & 0xF : byte_of(qs, j - 16) >> 4;
      if constexpr (T == DType::Q4_0) {
        out[j] = static_cast<float>(nibble - 8) * d;
      } else if constexpr (T == DType::Q4_1) {
        out[j] = static_cast<float>(nibble) * d + m;
      } else {
        const int q = nibble | static_cast<int>(((qh >> j) & 1) << 4);
        out[j] = static_cast<float>(q - 16) * d;
      }
    }
  } else if constexpr (T == DType::Q8_0) {  // fields: d | qs (32 int8)
    const float d = half_bits_to_float(load_u16(w.field(0, r, g)));
    const uint8_t* qs = w.field(1, r, g);
    for (int j = 0; j < kGroup; j += 4) {
      const uint32_t word = load_u32(qs + j);
      for (int i = 0; i < 4; ++i) {
        const auto q = static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * i)));
        out[j + i] = static_cast<float>(q) * d;
      }
    }
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    // Fields: d,dmin | scales[12] | (Q5_K: qh[32] |) qs[128]. Sub-block j's
    // element l: nibble j % 2 of qs[32 (j / 2) + l]; Q5_K's bit 4 is bit j of qh[l].
    const int64_t b = g / kKGroups;
    const int j = static_cast<int>(g % kKGroups);
    const uint8_t* head = w.field(0, r, b);
    const float d = half_bits_to_float(load_u16(head)),
                dmin = half_bits_to_float(load_u16(head + 2));
    int sc, mn;
    k4_scale_min(w.field(1, r, b), j, sc, mn);
    const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
    const uint8_t* qs = w.field(T == DType::Q5_K ? 3 : 2, r, b) + 32 * (j / 2);
    for (int half = 0; half < 2; ++half) {
      uint32_t lo[4], hi[4] = {0, 0, 0, 0};
      load_16_bytes(qs + 16 * half, lo);
      if constexpr (T == DType::Q5_K) load_16_bytes(w.field(2, r, b) + 16 * half, hi);
      for (int i = 0; i < 16; ++i) {
        const int q =
            ((byte_of(lo, i) >> (4 * (j % 2))) & 0xF) | (((byte_of(hi, i) >> j) & 1) << 4);
        out[16 * half + i] = dl * static_cast<float>(q) - ml;
      }
    }
  } else if constexpr (T == DType::Q6_K) {
    // Fields: ql[128] | qh[64] | int8 scales[16] | d. Element e = 32 gg + l of
    // the super-block (n = e / 128, k = (e % 128) / 32): low 4 bits in nibble
    // k / 2 of ql[64 n + 32 (k % 2) + l], high 2 bits at 2k of qh[32 n + l],
    // scale scales[e / 16]; x = d * scale * (q - 32).
    const int64_t b = g / kKGroups;
    const int gg = static_cast<int>(g % kKGroups), n = gg / 4, k = gg % 4;
    const float d = half_bits_to_float(load_u16(w.field(3, r, b)));
    const uint8_t* scales = w.field(2, r, b);
    const uint32_t sword = load_u32(scales + (2 * gg) / 4 * 4);
    const uint8_t* ql = w.field(0, r, b) + 64 * n + 32 * (k % 2);
    const uint8_t* qh = w.field(1, r, b) + 32 * n;
    for (int half = 0; half < 2; ++half) {
      const int si = 2 * gg + half;  // scale index e / 16
      const auto s = static_cast<int8_t>(static_cast<uint8_t>(sword >> (8 * (si % 4))));
      const float dl = d * static_cast<float>(s);
      uint32_t lo[4], hi[4];
      load_16_bytes(ql + 16 * half, lo);
      load_16_bytes(qh + 16 * half, hi);
      for (int i = 0; i < 16; ++i) {
        const int low = (byte_of(lo, i) >> (4 * (k / 2))) & 0xF;
        const int high = (byte_of(hi, i) >> (2 * k)) & 3;
        out[16 * half + i] = dl * static_cast<float>((low | (high << 4)) - 32);
      }
    }
  }
}

}  // namespace tandem::cuda
