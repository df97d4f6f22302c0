// Decoding the device weight layout (weight_layout.h) 16 bytes of a row's main
// plane at a time: the decoder of the "lanes" GEMV mapping (cuda_kernels.h:
// GemvMapping; device/gemv_lanes.cuh), run by the kernels on the device and by
// the layout tests on the host, as group_decode.h is for the "groups" mapping.
//
// Why chunks: in the groups mapping lane l decodes the 32-element groups l,
// l + 32, ... with 4-byte loads, so one load instruction of a warp touches 32
// words 16 to 64 bytes apart. Here lane l of a team reads 16-byte chunks l,
// l + team, ... of the row's main plane as one uint4 each, so a warp's load
// covers consecutive 16-byte chunks: whole 32-byte sectors, nothing skipped.
//
// A row's main plane is the field that holds its codes (qs; Q6_K's ql) or its
// values (F32, F16, BF16). The blocks of a row lie side by side in every plane,
// so a row's main plane is one run of bytes, and chunk c is its bytes
// [16 c, 16 c + 16). The chunk's small fields (d, dmin or m, scales, qh) are
// loaded beside it with their own loads. What chunk c holds:
//
//   F32: 4 consecutive elements; F16, BF16: 8; Q8_0: 16 (half a block).
//   Q4_0, Q4_1, Q5_0: one whole block, 32 consecutive elements.
//   Q4_K, Q5_K: part i = c % 8 of super-block c / 8, qs bytes 16 i .. 16 i + 15:
//     the low nibbles are elements 16 (i % 2) .. + 15 of sub-block 2 (i / 2), the
//     high nibbles the same elements of sub-block 2 (i / 2) + 1 (32 further on);
//     Q5_K's fifth bits are in qh bytes 16 (i % 2) .. + 15, bit j for sub-block j.
//   Q6_K: part i of super-block c / 8, ql bytes 16 i .. 16 i + 15: the low
//     nibbles are elements 16 (i % 2) .. + 15 of the 32-element group
//     4 (i / 4) + (i % 4) / 2, the high nibbles the same elements of the group
//     two later (64 further on); their top 2 bits are in qh bytes
//     32 (i / 4) + 16 (i % 2) .. + 15 (bits 2 k for group k of the 128), their
//     int8 scales are scales[i + 4 (i / 4)] and the one 4 further on.
//
// Every element's float comes from exactly the float operations of
// decode_group (the quant layer's reference dequantization), in the same
// order, so the two decoders give the same bits (cuda_chunk_decode_test checks
// it on the host; -fmad=false keeps nvcc from fusing on the device). One
// difference of form, not of value: a weight's small integer code becomes a
// float through an integer add and an exact float subtraction
// (small_int_to_float) instead of the conversion instruction, which the CUDA
// programming guide's throughput table gives 16 results a clock per SM against
// 128 float adds.
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "cuda/group_decode.h"
#include "cuda/host_device.h"

namespace tandem::cuda {

constexpr int kChunkBytes = 16;
constexpr int kMaxChunkElems = 32;

// Where chunk c's elements lie in its row: kRuns runs of kRunLen consecutive
// elements, run r starting at first(c) + r * kRunStride; decode_chunk writes
// them in that order.
template <DType T>
struct ChunkShape {
  static constexpr bool kKQuant = T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;
  static constexpr int kElems = T == DType::F32                       ? 4
                                : T == DType::F16 || T == DType::BF16 ? 8
                                : T == DType::Q8_0                    ? 16
                                                                      : 32;
  static constexpr int kRuns = kKQuant ? 2 : 1;
  static constexpr int kRunLen = kElems / kRuns;
  static constexpr int kRunStride = T == DType::Q6_K ? 64 : 32;  // between the two runs

  TANDEM_HD static int64_t first(int64_t c) {
    if constexpr (!kKQuant) {
      return c * kElems;
    } else {
      const int i = static_cast<int>(c % 8);
      const int64_t base = 256 * (c / 8);
      if constexpr (T == DType::Q6_K)
        return base + 128 * (i / 4) + 32 * ((i % 4) / 2) + 16 * (i % 2);
      return base + 64 * (i / 2) + 16 * (i % 2);
    }
  }
};

template <DType T>
TANDEM_HD int64_t chunks_per_row(int64_t k) {
  return k / ChunkShape<T>::kElems;
}

// The lanes of a warp that compute one output column together (a team): 32,
// or 16 where a 32-lane team's last pass over the row's K / 32 four-bit chunks
// would be at most half full. K = 1536 (the 1.5B model's d_model): 48 chunks,
// 3 passes of 16 lanes instead of 2 of 32 with half the lanes idle on the
// second. It depends on K alone, so all the columns of a launch, whatever
// their types, have the same team (the fused launches pair columns of two
// matrices), and a row's sum never depends on M.
TANDEM_HD int lanes_per_column(int64_t k) {
  const int64_t tail = (k / 32) % 32;
  return tail >= 1 && tail <= 16 ? 16 : 32;
}

// The lanes decoder's loads. On the device through the read-only data cache
// (the weights do not change during a kernel), 16 bytes as one uint4: the
// address is a multiple of 16 (planes_aligned, weight_layout.h, checks each
// matrix). On the host, byte copies.
TANDEM_HD void load_16_ro(const uint8_t* p, uint32_t w[4]) {
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
#else
  std::memcpy(w, p, 16);
#endif
}
TANDEM_HD uint32_t load_u32_ro(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned int*>(p));
#else
  return load_u32(p);
#endif
}
TANDEM_HD uint32_t load_u16_ro(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned short*>(p));
#else
  return load_u16(p);
#endif
}

// The float of an integer |q| < 2^22, exactly static_cast<float>(q): the bits
// of 1.5 * 2^23 + q (one unit in the last place is 1 there) minus 1.5 * 2^23,
// a subtraction with an exact result.
TANDEM_HD float small_int_to_float(int q) {
  return bits_to_float(0x4B400000u + static_cast<uint32_t>(q)) - 12582912.0f;
}

// Q4_K/Q5_K sub-block j's 6-bit scale and min from the 12 packed bytes held as
// three little-endian words: k4_scale_min's unpacking (GGML's packing), written
// with each byte taken from a named word. Sub-block j reads byte j % 4 of each
// word: j < 4 the low 6 bits of words 0 (scale) and 1 (min); j >= 4 the nibbles
// of word 2 and the top 2 bits of words 0 and 1. (Indexing a register array by
// a lane's run-time j, as `w[i / 4]`, would put the array in local memory.)
TANDEM_HD void k4_scale_min_of_words(uint32_t w0, uint32_t w1, uint32_t w2, int j, int& sc,
                                     int& m) {
  const int shift = 8 * (j % 4);
  const int a = static_cast<int>((w0 >> shift) & 0xFF), b = static_cast<int>((w1 >> shift) & 0xFF),
            c = static_cast<int>((w2 >> shift) & 0xFF);
  if (j < 4) {
    sc = a & 63;
    m = b & 63;
  } else {
    sc = (c & 0xF) | ((a >> 6) << 4);
    m = (c >> 4) | ((b >> 6) << 4);
  }
}

// The bytes one chunk's decode needs, loaded: what load_chunk reads and
// decode_chunk turns into floats (the fields a type lacks stay zero).
struct ChunkBytes {
  uint32_t qs[4];  // the main plane's 16 bytes
  uint32_t qh[4];  // Q5_K's, Q6_K's 16 bytes of high bits; Q5_0's word in qh[0]
  uint32_t sc[4];  // Q4_K/Q5_K's 12 packed scale bytes in sc[0..2]; Q6_K's 16 int8 scales
  uint32_t head;   // d in the low half; Q4_1's m, Q4_K/Q5_K's dmin in the high half
  int part;        // the chunk within its block: 0..7 for the K-quants, 0..1 for Q8_0
};

// Chunk c of row r (c < chunks_per_row<T>(k)).
template <DType T>
TANDEM_HD ChunkBytes load_chunk(const WeightPlanes& w, int64_t r, int64_t c) {
  ChunkBytes b{};
  if constexpr (T == DType::F32 || T == DType::F16 || T == DType::BF16) {
    load_16_ro(w.field(0, r, 0) + kChunkBytes * c, b.qs);
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q5_0) {
    // Fields: Q4_0 d | qs; Q4_1 d,m | qs; Q5_0 d | qh | qs. One block a chunk.
    b.head = T == DType::Q4_1 ? load_u32_ro(w.field(0, r, c)) : load_u16_ro(w.field(0, r, c));
    if constexpr (T == DType::Q5_0) b.qh[0] = load_u32_ro(w.field(1, r, c));
    load_16_ro(w.field(T == DType::Q5_0 ? 2 : 1, r, c), b.qs);
  } else if constexpr (T == DType::Q8_0) {  // fields: d | qs (32 int8): two chunks a block
    b.part = static_cast<int>(c % 2);
    b.head = load_u16_ro(w.field(0, r, c / 2));
    load_16_ro(w.field(1, r, c / 2) + kChunkBytes * b.part, b.qs);
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    // Fields: d,dmin | scales[12] | (Q5_K: qh[32] |) qs[128].
    const int64_t blk = c / 8;
    b.part = static_cast<int>(c % 8);
    b.head = load_u32_ro(w.field(0, r, blk));
    for (int i = 0; i < 3; ++i) b.sc[i] = load_u32_ro(w.field(1, r, blk) + 4 * i);
    if constexpr (T == DType::Q5_K) load_16_ro(w.field(2, r, blk) + 16 * (b.part % 2), b.qh);
    load_16_ro(w.field(T == DType::Q5_K ? 3 : 2, r, blk) + kChunkBytes * b.part, b.qs);
  } else if constexpr (T == DType::Q6_K) {
    // Fields: ql[128] | qh[64] | int8 scales[16] | d.
    const int64_t blk = c / 8;
    b.part = static_cast<int>(c % 8);
    load_16_ro(w.field(0, r, blk) + kChunkBytes * b.part, b.qs);
    load_16_ro(w.field(1, r, blk) + 32 * (b.part / 4) + 16 * (b.part % 2), b.qh);
    load_16_ro(w.field(2, r, blk), b.sc);
    b.head = load_u16_ro(w.field(3, r, blk));
  }
  return b;
}

// The ChunkShape<T>::kElems floats of a loaded chunk, in ChunkShape's order.
template <DType T>
TANDEM_HD void decode_chunk(const ChunkBytes& b, float out[kMaxChunkElems]) {
  if constexpr (T == DType::F32) {
    for (int i = 0; i < 4; ++i) out[i] = bits_to_float(b.qs[i]);
  } else if constexpr (T == DType::F16 || T == DType::BF16) {
    for (int i = 0; i < 4; ++i) {
      const auto lo = static_cast<uint16_t>(b.qs[i] & 0xFFFF),
                 hi = static_cast<uint16_t>(b.qs[i] >> 16);
      out[2 * i] = T == DType::F16 ? half_bits_to_float(lo) : bf16_bits_to_float(lo);
      out[2 * i + 1] = T == DType::F16 ? half_bits_to_float(hi) : bf16_bits_to_float(hi);
    }
  } else if constexpr (T == DType::Q4_0 || T == DType::Q4_1 || T == DType::Q5_0) {
    // Element j: low nibble of qs[j] (j < 16) or high nibble of qs[j - 16]; Q5_0's
    // bit 4 is bit j of qh.
    const float d = half_bits_to_float(static_cast<uint16_t>(b.head & 0xFFFF));
    const float m =
        T == DType::Q4_1 ? half_bits_to_float(static_cast<uint16_t>(b.head >> 16)) : 0.0f;
    for (int j = 0; j < 32; ++j) {
      const int nibble = j < 16 ? byte_of(b.qs, j) & 0xF : byte_of(b.qs, j - 16) >> 4;
      if constexpr (T == DType::Q4_0) {
        out[j] = small_int_to_float(nibble - 8) * d;
      } else if constexpr (T == DType::Q4_1) {
        out[j] = small_int_to_float(nibble) * d + m;
      } else {
        const int q = nibble | static_cast<int>(((b.qh[0] >> j) & 1) << 4);
        out[j] = small_int_to_float(q - 16) * d;
      }
    }
  } else if constexpr (T == DType::Q8_0) {
    const float d = half_bits_to_float(static_cast<uint16_t>(b.head));
    for (int i = 0; i < 16; ++i) {
      const auto q = static_cast<int8_t>(static_cast<uint8_t>(byte_of(b.qs, i)));
      out[i] = small_int_to_float(q) * d;
    }
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    // Run h (0, 1): nibble h of each byte, sub-block j = 2 (part / 2) + h.
    const float d = half_bits_to_float(static_cast<uint16_t>(b.head & 0xFFFF)),
                dmin = half_bits_to_float(static_cast<uint16_t>(b.head >> 16));
    for (int h = 0; h < 2; ++h) {
      const int j = 2 * (b.part / 2) + h;
      int sc, mn;
      k4_scale_min_of_words(b.sc[0], b.sc[1], b.sc[2], j, sc, mn);
      const float dl = d * static_cast<float>(sc), ml = dmin * static_cast<float>(mn);
      for (int i = 0; i < 16; ++i) {
        int q = (byte_of(b.qs, i) >> (4 * h)) & 0xF;
        if constexpr (T == DType::Q5_K) q |= ((byte_of(b.qh, i) >> j) & 1) << 4;
        out[16 * h + i] = dl * small_int_to_float(q) - ml;
      }
    }
  } else if constexpr (T == DType::Q6_K) {
    // Run h (0, 1): nibble h of each ql byte, group k = (part % 4) / 2 + 2 h of
    // its 128 elements (top bits at 2 k of qh), scale index part + 4 (part / 4) + 4 h:
    // byte part % 4 of word 2 (part / 4) + h (chosen, not indexed: see above).
    const float d = half_bits_to_float(static_cast<uint16_t>(b.head));
    for (int h = 0; h < 2; ++h) {
      const int k = (b.part % 4) / 2 + 2 * h;
      const uint32_t word = b.part < 4 ? b.sc[h] : b.sc[2 + h];
      const auto s = static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (b.part % 4))));
      const float dl = d * static_cast<float>(s);
      for (int i = 0; i < 16; ++i) {
        const int low = (byte_of(b.qs, i) >> (4 * h)) & 0xF;
        const int high = (byte_of(b.qh, i) >> (2 * k)) & 3;
        out[16 * h + i] = dl * small_int_to_float((low | (high << 4)) - 32);
      }
    }
  }
}

// Both steps: chunk c of row r as floats.
template <DType T>
TANDEM_HD void decode_chunk(const WeightPlanes& w, int64_t r, int64_t c,
                            float out[kMaxChunkElems]) {
  decode_chunk<T>(load_chunk<T>(w, r, c), out);
}

}  // namespace tandem::cuda
