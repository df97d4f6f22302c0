// The buffers one pool thread's share of a CPU kernel call works in: owned by a
// CpuKernels object (one per thread of its pool), sized at its construction for
// the largest call it serves, and handed to the kernels with each piece of
// work. They replace per-thread statics: nothing is allocated in a call.
#pragma once
#include <cstdint>

#include "core/aligned.h"
#include "kernels/cpu/activations.h"

namespace tandem::kernels::cpu {

// One weight row of a quantized type decoded into the form of quant_tile-inl.h
// (portable SIMD targets): an unsigned code per element in the activations'
// chunk layout, and per 16-element group a scale a and offset b.
struct UnpackedRow {
  AlignedVector<uint8_t> codes;  // (Kp) chunk layout, Kp = K rounded up to kChunk
  AlignedVector<float> a, b;     // (Kp / kGroup)
  void reserve(int64_t max_kp) {
    codes.reserve(max_kp);
    a.reserve(max_kp / kGroup);
    b.reserve(max_kp / kGroup);
  }
  // Sized for rows of Kp elements (within the reserved capacity: no allocation).
  void resize(int64_t Kp) {
    if (static_cast<int64_t>(codes.size()) == Kp) return;
    codes.assign(Kp, 0);
    a.assign(Kp / kGroup, 0.0f);
    b.assign(Kp / kGroup, 0.0f);
  }
};

struct WorkerScratch {
  // Matmul on portable SIMD targets: the weight row being applied.
  UnpackedRow unpacked;
  // Matmul on the scalar target: the weight row dequantized.
  AlignedVector<float> dequant;  // (max_k)
  // Attention, per job (a KV head and a tile of query rows):
  AlignedVector<float> key_row;  // (head_dim) one key widened to floats
  AlignedVector<float> keys_t;   // (head_dim, kKeyBlock) a key block, transposed
  AlignedVector<float> values;   // (kKeyBlock, head_dim) the key block's values
  AlignedVector<float> outputs;  // (tile rows * group, head_dim) unnormalised outputs

  // Capacity for matmuls of rows of up to max_k and attention over heads of
  // head_dim, max_group query heads per KV head, key blocks of key_block
  // positions and tiles of tile_rows query rows.
  void reserve(int64_t max_k, int head_dim, int max_group, int key_block, int tile_rows) {
    unpacked.reserve(round_up(max_k, kChunk));
    dequant.reserve(max_k);
    key_row.reserve(head_dim);
    keys_t.reserve(static_cast<size_t>(head_dim) * key_block);
    values.reserve(static_cast<size_t>(head_dim) * key_block);
    outputs.reserve(static_cast<size_t>(tile_rows) * max_group * head_dim);
  }
};

}  // namespace tandem::kernels::cpu
