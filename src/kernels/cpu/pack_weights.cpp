// Repacking Q4_K, Q6_K and legacy rows into the 16-row panels of packed_layout.h. Runs
// once per matrix at load, so it favours plain code over speed.
#include <cstddef>
#include <cstring>

#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/target_kernels.h"
#include "quant/quant_blocks.h"

namespace tandem::kernels::cpu {
namespace {

using namespace tandem::quant_detail;

// Each record is written a dword at a time: the 4 bytes of weight row r for one
// vector (steps of 4 elements) go to byte 4r of that vector.
void put_dword(uint8_t* rec, int vector, int r, const uint8_t* bytes) {
  std::memcpy(rec + 64 * vector + 4 * r, bytes, 4);
}

// Q4_K: sub-block s is nibble s % 2 of qs[32 (s / 2) + j], j = 0..31.
void pack_q4k_record(const uint8_t* const rows[kPanelRows], int64_t sb, uint8_t* rec) {
  uint8_t* scales = rec + 2048;
  uint16_t* d = reinterpret_cast<uint16_t*>(rec + 2304);
  for (int r = 0; r < kPanelRows; ++r) {
    const uint8_t* blk = rows[r] + sb * sizeof(BlockQ4_K);
    const uint8_t* qs = blk + offsetof(BlockQ4_K, qs);
    for (int s = 0; s < 8; ++s) {
      const uint8_t* q = qs + 32 * (s / 2);
      uint8_t packed[16];
      for (int j = 0; j < 16; ++j)
        packed[j] = s % 2 == 0 ? static_cast<uint8_t>((q[j] & 0xF) | (q[j + 16] << 4))
                               : static_cast<uint8_t>((q[j] >> 4) | (q[j + 16] & 0xF0));
      for (int i = 0; i < 4; ++i) put_dword(rec, 4 * s + i, r, packed + 4 * i);
      unpack_k4_scale_min(blk + offsetof(BlockQ4_K, scales), s, scales[32 * s + r],
                          scales[32 * s + 16 + r]);
    }
    std::memcpy(&d[r], blk + offsetof(BlockQ4_K, d), 2);
    std::memcpy(&d[16 + r], blk + offsetof(BlockQ4_K, dmin), 2);
  }
}

// Q6_K: element 128n + 32k + l has its low 4 bits in nibble k / 2 of
// ql[64n + 32 (k % 2) + l] and its high 2 bits at bits 2k of qh[32n + l].
void pack_q6k_record(const uint8_t* const rows[kPanelRows], int64_t sb, uint8_t* rec) {
  int8_t* scales = reinterpret_cast<int8_t*>(rec + kQ6KScalesAt);
  uint16_t* d = reinterpret_cast<uint16_t*>(rec + kQ6KdAt);
  std::memset(rec + kQ6KdAt + 32, 0, 32);
  for (int r = 0; r < kPanelRows; ++r) {
    const uint8_t* blk = rows[r] + sb * sizeof(BlockQ6_K);
    const uint8_t* ql = blk + offsetof(BlockQ6_K, ql);
    const uint8_t* qh = blk + offsetof(BlockQ6_K, qh);
    for (int h = 0; h < 8; ++h) {  // elements 32h..32h+31: n = h / 4, k = h % 4
      const uint8_t* q = ql + 64 * (h / 4) + 32 * (h % 2);
      const int shift = 4 * ((h % 4) / 2);
      uint8_t packed[16];
      for (int j = 0; j < 16; ++j)
        packed[j] =
            static_cast<uint8_t>(((q[j] >> shift) & 0xF) | ((q[j + 16] >> shift) & 0xF) << 4);
      for (int i = 0; i < 4; ++i) put_dword(rec, q6k_low_vector(h, i), r, packed + 4 * i);
    }
    // Quarter v (elements 64v..64v+63) is n = v / 2, k = 2 (v % 2) + j / 2 for its
    // 16-element part j: qh[32n + 16 (j % 2) + e], e = 0..15, bits 2k.
    for (int v = 0; v < 4; ++v) {
      uint8_t packed[16] = {};
      for (int j = 0; j < 4; ++j) {
        const uint8_t* h = qh + 32 * (v / 2) + 16 * (j % 2);
        const int k = 2 * (v % 2) + j / 2;
        for (int e = 0; e < 16; ++e)
          packed[e] = static_cast<uint8_t>(packed[e] | ((h[e] >> (2 * k)) & 3) << (2 * j));
      }
      for (int i = 0; i < 4; ++i) put_dword(rec, q6k_high_vector(v, i), r, packed + 4 * i);
    }
    const auto* sc = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
    for (int g = 0; g < 16; ++g) scales[16 * g + r] = sc[g];
    std::memcpy(&d[r], blk + offsetof(BlockQ6_K, d), 2);
  }
}

// Legacy types: two 32-element blocks per record (see packed_layout.h).
template <class Block>
const uint8_t* block_at(const uint8_t* row, int64_t b) {
  return row + b * sizeof(Block);
}

void pack_legacy_record(DType type, const uint8_t* const rows[kPanelRows], int64_t rec_index,
                        uint8_t* rec) {
  const size_t d_at = type == DType::Q8_0 ? 1024 : type == DType::Q5_0 ? 640 : 512;
  uint16_t* d = reinterpret_cast<uint16_t*>(rec + d_at);
  uint16_t* m = reinterpret_cast<uint16_t*>(rec + 576);  // Q4_1 only
  if (type == DType::Q5_0) std::memset(rec + 512, 0, 128);
  for (int h = 0; h < 2; ++h) {
    const int64_t b = 2 * rec_index + h;
    for (int r = 0; r < kPanelRows; ++r) {
      switch (type) {
        case DType::Q8_0: {
          const uint8_t* blk = block_at<BlockQ8_0>(rows[r], b);
          for (int i = 0; i < 8; ++i) {
            uint8_t codes[4];
            for (int k = 0; k < 4; ++k)
              codes[k] = static_cast<uint8_t>(blk[offsetof(BlockQ8_0, qs) + 4 * i + k] ^ 0x80);
            put_dword(rec, 8 * h + i, r, codes);
          }
          std::memcpy(&d[16 * h + r], blk + offsetof(BlockQ8_0, d), 2);
          break;
        }
        case DType::Q5_0: {
          const uint8_t* blk = block_at<BlockQ5_0>(rows[r], b);
          for (int v = 0; v < 4; ++v)
            put_dword(rec, 4 * h + v, r, blk + offsetof(BlockQ5_0, qs) + 4 * v);
          uint32_t qh;
          std::memcpy(&qh, blk + offsetof(BlockQ5_0, qh), 4);
          for (int i = 0; i < 8; ++i)
            for (int k = 0; k < 4; ++k)
              rec[512 + 64 * h + 4 * r + k] |= static_cast<uint8_t>(((qh >> (4 * i + k)) & 1) << i);
          std::memcpy(&d[16 * h + r], blk + offsetof(BlockQ5_0, d), 2);
          break;
        }
        case DType::Q4_1: {
          const uint8_t* blk = block_at<BlockQ4_1>(rows[r], b);
          for (int v = 0; v < 4; ++v)
            put_dword(rec, 4 * h + v, r, blk + offsetof(BlockQ4_1, qs) + 4 * v);
          std::memcpy(&d[16 * h + r], blk + offsetof(BlockQ4_1, d), 2);
          std::memcpy(&m[16 * h + r], blk + offsetof(BlockQ4_1, m), 2);
          break;
        }
        default: {  // Q4_0
          const uint8_t* blk = block_at<BlockQ4_0>(rows[r], b);
          for (int v = 0; v < 4; ++v)
            put_dword(rec, 4 * h + v, r, blk + offsetof(BlockQ4_0, qs) + 4 * v);
          std::memcpy(&d[16 * h + r], blk + offsetof(BlockQ4_0, d), 2);
          break;
        }
      }
    }
  }
}

}  // namespace

void pack_panels(DType type, const uint8_t* w, size_t row_bytes, int64_t K, int64_t p0, int64_t p1,
                 uint8_t* out) {
  const size_t record = packed_record_bytes(type);
  const int64_t n_records = K / packed_record_elements(type);
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* rows[kPanelRows];
    for (int r = 0; r < kPanelRows; ++r) rows[r] = w + (p * kPanelRows + r) * row_bytes;
    for (int64_t i = 0; i < n_records; ++i, out += record) {
      if (type == DType::Q4_K)
        pack_q4k_record(rows, i, out);
      else if (type == DType::Q6_K)
        pack_q6k_record(rows, i, out);
      else
        pack_legacy_record(type, rows, i, out);
    }
  }
}

bool packed_kernel_available(int64_t target) {
  const TargetKernels& k = target == 0 ? best_target_kernels() : target_kernels(target);
  return k.matmul_packed != nullptr;
}

AlignedVector<uint8_t> pack_matrix(const TensorView& W, int64_t target, ThreadPool& pool) {
  const size_t record = packed_record_bytes(W.type);
  const int64_t K = W.ne(0), N = W.ne(1);
  if (record == 0 || W.shape.size() != 2 || N % kPanelRows != 0 ||
      K % packed_record_elements(W.type) != 0 || !packed_kernel_available(target))
    return {};
  const size_t panel_bytes = static_cast<size_t>(K / packed_record_elements(W.type)) * record;
  AlignedVector<uint8_t> out(static_cast<size_t>(N / kPanelRows) * panel_bytes);
  pool.parallel_for(N / kPanelRows, [&](int64_t p0, int64_t p1, int) {
    pack_panels(W.type, W.data, W.row_bytes(), K, p0, p1, out.data() + p0 * panel_bytes);
  });
  return out;
}

}  // namespace tandem::kernels::cpu
