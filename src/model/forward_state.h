// Every buffer a forward pass of the transformer works in, allocated once when
// the transformer is made, for passes of at most max_tokens positions (longer
// batches are run in passes of that size). Nothing is allocated while a pass
// runs. Rows are row-major, one per position of the pass; the buffers are
// cache-line aligned so that the kernels' vector loads and stores of a row do
// not straddle two lines. The kernels' own scratch belongs to their Kernels
// object (kernels.h), sized for the same passes.
#pragma once
#include <vector>

#include "core/aligned.h"
#include "kernels/kernels.h"
#include "model/config.h"

namespace tandem {

// A chain of positions of one slot in a pass: rows [begin, end), each row the
// child of the one before. A run of drafted tree nodes reads its ancestors
// through a remap (KVSeqView): logical positions from remap_from on
// are at the physical positions remap[remap_begin..] of ForwardState::remap.
struct SlotRun {
  int slot, begin, end;
  int remap_begin = -1;  // -1: no remap (logical and physical positions agree)
  int remap_from = 0;
};

struct ForwardState {
  ForwardState(const ModelConfig& c, int max_tokens);

  int max_tokens;
  AlignedVector<float> x;         // (max_tokens, d_model) the residual stream
  AlignedVector<float> xn;        // (max_tokens, d_model) a block's normalised input
  AlignedVector<float> q;         // (max_tokens, n_heads * head_dim)
  AlignedVector<float> k;         // (max_tokens, n_kv_heads * head_dim)
  AlignedVector<float> v;         // (max_tokens, n_kv_heads * head_dim)
  AlignedVector<float> attn;      // (max_tokens, n_heads * head_dim) attention output
  AlignedVector<float> gate;      // (max_tokens, d_ff)
  AlignedVector<float> up;        // (max_tokens, d_ff)
  AlignedVector<float> hidden;    // (max_tokens, d_ff) silu(gate) * up
  AlignedVector<float> out;       // (max_tokens, d_model) a block's output, before the residual add
  AlignedVector<float> rope_cos;  // (max_tokens, head_dim / 2) each position's rotation
  AlignedVector<float> rope_sin;  // (max_tokens, head_dim / 2)
  std::vector<SlotRun> runs;      // (at most max_tokens) the slots' runs of the pass
  std::vector<kernels::AttentionCall> attention_calls;  // (as runs) a layer's attention
  std::vector<int> remap;  // the runs' remaps, one after another (reserved; grows
                           // only for trees with many deep branches in one pass)
};

}  // namespace tandem
