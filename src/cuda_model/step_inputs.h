// A forward pass's per-row inputs as the CUDA kernels read them, built on the
// host from a ForwardBatch: token ids, logical positions (RoPE and the causal
// extent), physical positions (where kv_store writes), each row's sequence in
// the step's block tables, each row's tree remap, and its RoPE angles.
//
// Pure host logic, built in every build and tested on the CPU: the device
// kernels then see exactly what the CPU's attention sees through KVSeqView.
#pragma once
#include <functional>
#include <vector>

#include "model/forward_batch.h"

namespace tandem::cuda_model {

// A row with no remap: positions below this read their own rows, i.e. all.
constexpr int kNoRemap = 1 << 30;

// Capacities, fixed at load (the device buffers are sized by them).
struct StepLimits {
  int max_rows = 1;      // rows of one pass (padding included)
  int max_seqs = 1;      // sequences of one pass
  int table_stride = 1;  // blocks per sequence's table: the longest context / block size
  int max_remap = 1;     // remap entries per row (a tree path's length)
  int rope_half = 1;     // head_dim / 2
};

struct StepInputs {
  int rows = 0;  // real rows, then padding up to padded_rows
  int padded_rows = 0;
  int n_seqs = 0;        // block tables used (the padding sequence comes after them)
  int remap_stride = 1;  // entries per row in `remap`
  int max_keys = 1;      // the longest row's positions attended to (pos + 1)
  std::vector<int> tokens, pos, kv_pos, seq, remap_from, remap, tables;
  std::vector<float> cos, sin;
  std::vector<int> slots;  // sequence index -> cache slot
};

// The block table of a cache slot (physical block ids in position order).
using TableOf = std::function<const std::vector<int>&(int slot)>;

// Rows [begin, begin + n) of `batch` into `out`, padded to padded_rows (>= n)
// with rows that read and write only `pad_block` at position 0 (their results
// are never read; batch invariance keeps them out of the real rows). A row of
// a drafted tree gets the remap of its own path: the physical positions of its
// ancestors from the first whose logical and physical positions differ, as the
// CPU's KVSeqView remap. remap_stride: 0 chooses the longest path (eager), else
// that many entries (a graph's fixed stride). Throws tandem::Error when the
// pass exceeds the limits.
void build_step_inputs(const ForwardBatch& batch, int begin, int n, int padded_rows,
                       int remap_stride, const StepLimits& limits, const TableOf& table_of,
                       int pad_block, const std::vector<float>& inv_freq, StepInputs& out);

}  // namespace tandem::cuda_model
