// Where the keys and values of one layer of one sequence lie: the view a KV
// cache gives of a slot and the attention kernels read. Here, below both, so that
// the cache needs nothing of the kernels.
#pragma once
#include "core/dtype.h"

namespace tandem {

// K and V of one layer for one sequence. Position p lives in block p / block_size
// at row p % block_size; a row holds n_kv_heads * head_dim values of `type`
// (F32 or F16). A contiguous cache is one block as long as the context.
//
// With a remap, the positions the attention sees are logical: position p >=
// remap_from reads the row of physical position remap[p - remap_from], and the
// positions below it read their own rows. A drafted tree stores its nodes side
// by side in the cache, and a node reads its ancestors' rows through the remap
// as if they were the positions before it. The remap covers every position the
// call attends to.
struct KVSeqView {
  const void* const* k_blocks = nullptr;
  const void* const* v_blocks = nullptr;
  int block_size = 0;
  DType type = DType::F32;
  const int* remap = nullptr;
  int remap_from = 0;

  // The physical position of logical position p.
  int physical(int p) const { return remap && p >= remap_from ? remap[p - remap_from] : p; }
};

}  // namespace tandem
