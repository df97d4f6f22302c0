// The packed layout of the Q4_K, Q6_K, Q4_0, Q4_1, Q5_0 and Q8_0 weights: 16 rows
// interleaved, made once
// at load (pack_weights.cpp) for the AVX-512 VNNI and AVX2 matmul (matmul_packed.cpp).
//
// Why. The file's layout keeps each weight row contiguous, so a vpdpbusd covers
// 64 weights of one row and its 16 lanes are 16 different scale groups: every
// activation row then pays float work per group (convert, scale, min) on top of
// the integer dot product. Here the 16 lanes are 16 rows: a lane's sum covers one
// group of one row, a whole scale group takes one integer chain, and the 4 bytes
// of activations each step needs are one broadcast. An extra activation row
// (speculative verification) costs the dot products and one float step per
// 32 (Q4_K) or 16 (Q6_K) weights, about a third of the file layout's cost.
//
// Shape. Rows 16p..16p+15 form panel p; a panel is a run of records, one per
// super-block (256 elements; legacy types: per two blocks, 64 elements), and
// panels follow each other. Record of super-block
// sb of panel p, rows r = 0..15 (`code(r, e)`: the unsigned code of element
// 256 sb + e of row 16p + r):
//
// Q4_K, 2368 bytes:
//   [0, 2048)     vector 4s + i (sub-block s = 0..7, i = 0..3), byte 4r + b:
//                 code(r, 32s + 4i + b) | code(r, 32s + 16 + 4i + b) << 4
//   [2048, 2304)  byte 32s + r: scale of sub-block s of row r; 32s + 16 + r: its min
//   [2304, 2368)  d of rows 0..15, then dmin (fp16)
// Q6_K, 3392 bytes (codes 0..63; a 16-element group g has scale sc[g]), in the
// order the kernel reads it:
//   [0, 32)       d of rows 0..15 (fp16); [32, 64) zero
//   [64, 320)     byte 16g + r: scale of group g of row r (int8)
//   then 48 code vectors, numbered from the record's start:
//   low vector L(h, i) (group pair h = 0..7, i = 0..3), vector q6k_low_vector(h, i),
//                 byte 4r + b: low4(r, 32h + 4i + b) | low4(r, 32h + 16 + 4i + b) << 4
//   high vector H(q, i) (quarter q = 0..3), vector q6k_high_vector(q, i), byte
//                 4r + b, bits 2j..2j+1: high2(r, 64q + 16j + 4i + b), j = 0..3
//   Pair h's four low vectors come in turn, and quarter q's four high vectors
//   (which pairs 2q and 2q + 1 share) right after pair 2q's: so a record is
//   read in ascending order. With all the low vectors first and the high ones
//   2 KB further on, the kernel's reads jumped between the two and a matmul
//   streamed from memory more slowly (docs/decisions.md, "A Q6_K record in the
//   order it is read").
//
// The legacy types take records of two 32-element blocks (64 elements), h = 0, 1
// the block, codes unsigned (Q8_0: q + 128):
// Q4_0 (576 bytes), Q4_1 (640), Q5_0 (704):
//   [0, 512)      vector 4h + v (v = 0..3), byte 4r + b:
//                 low4(r, 32h + 4v + b) | low4(r, 32h + 16 + 4v + b) << 4
//                 (the file's qs bytes 4v..4v+3 of the block, as they are)
//   Q5_0 [512, 640)  vector h, byte 4r + b, bit i: bit 4 of code(r, 32h + 4i + b)
//   then d of rows 0..15 for block 0, for block 1 (fp16); Q4_1 then m likewise
// Q8_0 (1088 bytes):
//   [0, 1024)     vector 8h + i (i = 0..7), byte 4r + b: code(r, 32h + 4i + b)
//   [1024, 1088)  d of rows 0..15 for block 0, for block 1 (fp16)
//
// Records are multiples of 64 bytes, so with a 64-byte aligned buffer every
// vector load stays in one cache line. The packed matrix holds the same
// information as the file, a few percent larger (Q4_K's 6-bit scales take a
// byte each).
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/aligned.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace tandem::kernels::cpu {

constexpr int kPanelRows = 16;
constexpr size_t kQ4KRecordBytes = 2368;
constexpr size_t kQ6KRecordBytes = 3392;
constexpr size_t kQ4_0RecordBytes = 576;
constexpr size_t kQ4_1RecordBytes = 640;
constexpr size_t kQ5_0RecordBytes = 704;
constexpr size_t kQ8_0RecordBytes = 1088;

// Where a Q6_K record's parts lie (above): bytes, and 64-byte vectors. The
// head (d, then the scales) takes the first vectors; pair h's low vectors
// follow every earlier pair's and the high vectors of every quarter begun so
// far; quarter q's high vectors follow pair 2q's low ones.
constexpr size_t kQ6KdAt = 0;
constexpr size_t kQ6KScalesAt = 64;
constexpr int kQ6KHeadVectors = static_cast<int>(kQ6KScalesAt + 256) / 64;
constexpr int q6k_low_vector(int h, int i) {
  return kQ6KHeadVectors + 4 * h + 4 * ((h + 1) / 2) + i;
}
constexpr int q6k_high_vector(int q, int i) { return q6k_low_vector(2 * q, 0) + 4 + i; }
// Whether the head and the 48 code vectors take each of a record's 53 vectors once.
constexpr bool q6k_vectors_tile_the_record() {
  int uses[kQ6KRecordBytes / 64] = {};
  for (int v = 0; v < kQ6KHeadVectors; ++v) ++uses[v];
  for (int i = 0; i < 4; ++i) {
    for (int h = 0; h < 8; ++h) ++uses[q6k_low_vector(h, i)];
    for (int q = 0; q < 4; ++q) ++uses[q6k_high_vector(q, i)];
  }
  for (int u : uses)
    if (u != 1) return false;
  return true;
}
static_assert(q6k_vectors_tile_the_record());
// Codes from vector 5 on; the last high vector is 48, the last low one 52.
static_assert(q6k_low_vector(0, 0) == 5 && q6k_high_vector(3, 3) == 48 &&
              q6k_low_vector(7, 3) == 52);

// Bytes of one packed record of `type`, or 0 when the type has no packed layout.
constexpr size_t packed_record_bytes(DType type) {
  switch (type) {
    case DType::Q4_K:
      return kQ4KRecordBytes;
    case DType::Q6_K:
      return kQ6KRecordBytes;
    case DType::Q4_0:
      return kQ4_0RecordBytes;
    case DType::Q4_1:
      return kQ4_1RecordBytes;
    case DType::Q5_0:
      return kQ5_0RecordBytes;
    case DType::Q8_0:
      return kQ8_0RecordBytes;
    default:
      return 0;
  }
}

// Elements of a row per record: a super-block, or two legacy blocks.
constexpr int64_t packed_record_elements(DType type) {
  return type == DType::Q4_K || type == DType::Q6_K ? 256 : 64;
}

// Panel p of a packed {K, N} matrix.
inline const uint8_t* packed_panel(const uint8_t* packed, DType type, int64_t K, int64_t p) {
  return packed + static_cast<size_t>(p) * static_cast<size_t>(K / packed_record_elements(type)) *
                      packed_record_bytes(type);
}

// Repack rows [16 p0, 16 p1) of W (file layout, `row_bytes` per row of K
// elements) into panels p0..p1-1 at `out` (the panel p0's position).
void pack_panels(DType type, const uint8_t* w, size_t row_bytes, int64_t K, int64_t p0, int64_t p1,
                 uint8_t* out);

// W packed (in parallel), or empty when W's type or shape has no packed layout
// or the matmul of `target` (0: this CPU's best) does not read it.
AlignedVector<uint8_t> pack_matrix(const TensorView& W, int64_t target, ThreadPool& pool);

// Whether the matmul of `target` (0: this CPU's best) uses the packed layout
// (AVX-512 VNNI, AVX2).
bool packed_kernel_available(int64_t target = 0);

}  // namespace tandem::kernels::cpu
