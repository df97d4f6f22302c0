// The batch of one forward pass: tokens with their logical and physical
// positions, their slots, the rows whose logits are wanted and, for a drafted
// tree, each node's parent. Shared by every forward pass (model/forward_pass.h):
// the CPU transformer and the CUDA one read the same batch.
#pragma once
#include <vector>

#include "cache/kv_cache.h"
#include "model/config.h"

namespace tandem {

// Tokens of one slot are consecutive. Each has a logical position (its RoPE
// angle and causal extent) and a physical one (where its K/V is written); they
// differ only for the nodes of a drafted tree, which lie side by side in the
// cache. Physical positions continue the slot's cache.
struct ForwardBatch {
  std::vector<int> tokens;
  std::vector<int> positions;  // logical
  std::vector<int> slots;
  std::vector<int> logit_rows;  // indices into tokens whose logits are wanted, in output order
  // Per token: the batch index of its parent in a drafted tree, or -1 when it
  // follows the previous position of its slot (every token added by
  // add_sequence). Empty when the batch holds no tree.
  std::vector<int> parents;
  // Per token: its physical position. Empty when the batch holds no tree (then
  // equal to positions).
  std::vector<int> kv_positions;

  void clear() {
    tokens.clear();
    positions.clear();
    slots.clear();
    logit_rows.clear();
    parents.clear();
    kv_positions.clear();
  }
  // Room for n tokens in every list: a batch reused pass after pass (cleared,
  // then filled) then allocates nothing up to n.
  void reserve(int n) {
    for (auto* v : {&tokens, &positions, &slots, &logit_rows, &parents, &kv_positions})
      v->reserve(static_cast<size_t>(n));
  }
  // Append n tokens of one sequence at positions start.., optionally all wanting logits.
  void add_sequence(int slot, const int* ids, int n, int start, bool all_logits, bool last_logits);
  // Append a tree of n tokens of one sequence: parent[j] is the index (within
  // these n, < j) of token j's parent, or -1 for a child of the token at
  // position start - 1 (the slot's last cached or earlier-added position). Token j
  // is rotated and attends as position start + depth(j) (its logical position) and
  // its K/V is written at cache position start + j (its physical position).
  // With all_logits every token's logits are wanted. Throws tandem::Error for a
  // parent index outside [-1, j).
  void add_tree(int slot, const int* ids, const int* parent, int n, int start, bool all_logits);
  int size() const { return static_cast<int>(tokens.size()); }
  int parent(int i) const { return parents.empty() ? -1 : parents[i]; }
  int kv_position(int i) const { return kv_positions.empty() ? positions[i] : kv_positions[i]; }
};

// What every forward pass does with a batch around its kernels, the same for
// each so that the CPU and the CUDA passes accept and refuse the same batches.
// Throws tandem::Error for a batch the cache and the model cannot take: tokens
// outside the vocabulary, positions that do not continue the slot's cache,
// tree parents that are not earlier tokens of the slot, positions past the
// context.
void validate_forward_batch(const ForwardBatch& batch, const KVCache& cache,
                            const ModelConfig& config);
// Cache room for each slot's run, before any pass writes (throws when the cache
// has none); the lengths advance after the last pass (advance_forward_batch).
void reserve_forward_batch(const ForwardBatch& batch, KVCache& cache);
void advance_forward_batch(const ForwardBatch& batch, KVCache& cache);

}  // namespace tandem
