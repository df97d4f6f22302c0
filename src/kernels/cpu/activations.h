// Activations quantized to int8 on the fly, so that quantized weights meet them
// in integer dot products. Private to the CPU kernels.
//
// Two scale granularities, one layout:
// - per 32 elements (the legacy weight types, GGML's Q8_0 idea);
// - per 256 elements (the K-quants, GGML's Q8_K idea).
//
// Layout. A row is cut into 256-element chunks, each seen as 16 groups of 16
// elements (group j = elements 16j..16j+15) and each group as 4 granules of 4
// bytes. The chunk stores granule k of group j at bytes 64k + 4j:
//   q[64k + 4j + b] = code of element 16j + 4k + b.
// So the k-th 64-byte vector of a chunk holds granule k of every group, and an
// int8 dot product that accumulates the 4 vectors (vpdpbusd) leaves group j's
// whole dot product in 32-bit lane j. Every weight type's scales are constant
// over a group (K-quant sub-blocks of 16 or 32, legacy blocks of 32), so the
// kernels apply them with one float vector per chunk, whatever the vector width:
// a narrower vector covers fewer groups at the same offsets.
//
// Per group the row also keeps its scale d (the scale of the block the group
// lies in) and the sum of its codes (for the weights' offsets and mins), both as
// floats (the sums are small integers, exact).
//
// Rounding: q = nearest-even(x * 127 / max|x|) in [-127, 127] per block; all-zero
// blocks get d = 0 and q = 0. Rows are padded with zeros (q = 0, d = 0, sum = 0)
// to a whole chunk.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned.h"

namespace tandem::kernels::cpu {

constexpr int kChunk = 256;  // elements per layout chunk
constexpr int kGroup = 16;   // elements per group (one 32-bit lane of results)
constexpr int kGroupsPerChunk = kChunk / kGroup;

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Filled by quantize_acts (cpu_kernels.h).
struct QActs {
  int M = 0;
  int64_t K = 0, Kp = 0;      // Kp: K rounded up to kChunk
  int block = 0;              // elements per scale: 32 or 256
  AlignedVector<int8_t> q;    // M x Kp, chunk layout above
  AlignedVector<float> gsum;  // M x Kp / 16: sum of the codes of each group
  AlignedVector<float> gd;    // M x Kp / 16: the scale of each group's block
  const int8_t* row_q(int m) const { return q.data() + m * Kp; }
  const float* row_gsum(int m) const { return gsum.data() + m * (Kp / kGroup); }
  const float* row_gd(int m) const { return gd.data() + m * (Kp / kGroup); }

  // Derived sums for the packed kernels (packed_layout.h): per 32 elements the
  // sum of the codes; as the integer a dot product starts from, for block 256
  // per group -32 times its sum (Q6_K's offset of 32), and for block 32 per 32
  // elements -8 times their sum (Q4_0's offset of 8; Q5_0's and Q8_0's are
  // powers of two times it). A kernel then starts each chain from a broadcast
  // load rather than converting, multiplying and broadcasting a float for every
  // block and row (docs/decisions.md, "Legacy blocks start from a loaded offset").
  AlignedVector<float> sum32;        // M x Kp / 32
  AlignedVector<int32_t> q6_offset;  // M x Kp / 16 (block 256)
  AlignedVector<int32_t> q4_offset;  // M x Kp / 32 (block 32)
  const float* row_sum32(int m) const { return sum32.data() + m * (Kp / 32); }
  const int32_t* row_q6_offset(int m) const { return q6_offset.data() + m * (Kp / kGroup); }
  const int32_t* row_q4_offset(int m) const { return q4_offset.data() + m * (Kp / 32); }

  // Capacity for max_rows rows of up to max_k elements with one scale per
  // `block` (q6_offset only for 256, q4_offset only for 32), so that quantizing
  // them allocates nothing.
  void reserve(int max_rows, int64_t max_k, int block) {
    const size_t rows = static_cast<size_t>(max_rows), kp = round_up(max_k, kChunk);
    q.reserve(rows * kp);
    gsum.reserve(rows * kp / kGroup);
    gd.reserve(rows * kp / kGroup);
    sum32.reserve(rows * kp / 32);
    if (block == 256) q6_offset.reserve(rows * kp / kGroup);
    if (block == 32) q4_offset.reserve(rows * kp / 32);
  }
};

}  // namespace tandem::kernels::cpu
