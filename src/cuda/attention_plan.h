// The split-K plan of the paged attention kernels (device/attention.cu), shared
// with the memory plan: a query row's keys are cut into chunks of
// kAttentionChunk positions, each chunk's partial softmax (its max, its sum and
// its weighted values) computed by one thread block, and the partials combined
// in chunk order.
//
// The chunking depends on the row's own position alone, never on how many rows
// share the call or how long the others' contexts are, so a row's output is
// bit-identical in any batch; a short context is one chunk and the same
// arithmetic.
#pragma once
#include <cstdint>

#include "cuda/host_device.h"

namespace tandem::cuda {

constexpr int kAttentionChunk = 256;  // keys per chunk (per thread block)
constexpr int kMaxHeadDim = 256;  // the kernels keep one head of q and the scores in shared memory

// Chunks of a row that attends to n_keys positions.
TANDEM_HD int attention_chunks(int n_keys) {
  return (n_keys + kAttentionChunk - 1) / kAttentionChunk;
}

// Floats of scratch an attention call needs: per row, head and chunk, the
// partial max and sum and head_dim weighted values.
inline int64_t attention_scratch_floats(int rows, int n_heads, int head_dim, int max_keys) {
  return int64_t{rows} * n_heads * attention_chunks(max_keys) * (head_dim + 2);
}

}  // namespace tandem::cuda
