#include "model/forward_batch.h"

#include "core/error.h"
#include "model/config.h"

namespace tandem {
namespace {

// Whether position i is the last of its slot's run in the batch.
bool ends_run(const ForwardBatch& b, int i) {
  return i + 1 == b.size() || b.slots[i + 1] != b.slots[i];
}

// A token's logical position: its parent's plus one, or for a token without a
// parent in the batch at most chain_end (its keys below it are the slot's
// chain). It never exceeds its physical position, nor the model's context.
void validate_logical(const ForwardBatch& b, int i, int run_begin, int chain_end,
                      const ModelConfig& config) {
  const int parent = b.parent(i), pos = b.positions[i];
  if (parent >= 0) {
    check(parent < i && parent >= run_begin,
          "forward: slot {} token {}'s parent {} is not an earlier token of the slot in the batch",
          b.slots[i], i, parent);
    check(pos == b.positions[parent] + 1,
          "forward: slot {} tree token {} has position {}, expected its parent's plus one ({})",
          b.slots[i], i, pos, b.positions[parent] + 1);
  } else {
    check(parent == -1, "forward: slot {} token {} has parent {}", b.slots[i], i, parent);
    check(pos >= 0 && pos <= chain_end,
          "forward: slot {} token {} has position {}, but the slot holds a chain only up to "
          "position {} (the tokens of a tree name their parents)",
          b.slots[i], i, pos, chain_end);
  }
  check(pos < config.context_length, "forward: position {} beyond the model's context length {}",
        pos, config.context_length);
}

}  // namespace

void ForwardBatch::add_sequence(int slot, const int* ids, int n, int start, bool all_logits,
                                bool last_logits) {
  for (int i = 0; i < n; ++i) {
    if (all_logits || (last_logits && i == n - 1)) logit_rows.push_back(size());
    if (!parents.empty()) parents.push_back(-1);
    if (!kv_positions.empty()) kv_positions.push_back(start + i);
    tokens.push_back(ids[i]);
    positions.push_back(start + i);
    slots.push_back(slot);
  }
}

void ForwardBatch::add_tree(int slot, const int* ids, const int* parent, int n, int start,
                            bool all_logits) {
  for (int j = 0; j < n; ++j)
    check(parent[j] >= -1 && parent[j] < j,
          "add_tree: token {}'s parent {} is not an earlier token of the tree (-1 or in [0, {}))",
          j, parent[j], j);
  // The tokens before the first tree follow their slots' previous positions,
  // where they are written.
  const int base = size();
  parents.resize(base, -1);
  if (kv_positions.empty()) kv_positions = positions;
  for (int j = 0; j < n; ++j) {
    if (all_logits) logit_rows.push_back(size());
    const int p = parent[j] < 0 ? -1 : base + parent[j];
    parents.push_back(p);
    kv_positions.push_back(start + j);
    positions.push_back(p < 0 ? start : positions[p] + 1);
    tokens.push_back(ids[j]);
    slots.push_back(slot);
  }
}

void validate_forward_batch(const ForwardBatch& b, const KVCache& cache,
                            const ModelConfig& config) {
  const int n = b.size();
  check(n > 0, "forward: empty batch");
  check(static_cast<int>(b.positions.size()) == n && static_cast<int>(b.slots.size()) == n,
        "forward: tokens, positions and slots differ in length");
  check(b.parents.empty() || static_cast<int>(b.parents.size()) == n,
        "forward: {} parents for {} tokens", b.parents.size(), n);
  check(b.kv_positions.empty() || static_cast<int>(b.kv_positions.size()) == n,
        "forward: {} physical positions for {} tokens", b.kv_positions.size(), n);
  int run_begin = 0, chain_end = 0;
  for (int i = 0; i < n; ++i) {
    check(b.tokens[i] >= 0 && b.tokens[i] < config.vocab_size,
          "forward: token id {} outside the vocabulary [0, {})", b.tokens[i], config.vocab_size);
    if (i == 0 || b.slots[i] != b.slots[i - 1]) {
      run_begin = i;
      chain_end = cache.length(b.slots[i]);
    }
    const int expect = i == run_begin ? chain_end : b.kv_position(i - 1) + 1;
    check(b.kv_position(i) == expect,
          "forward: slot {} token {} has physical position {}, expected {} (positions must "
          "continue the cache)",
          b.slots[i], i, b.kv_position(i), expect);
    validate_logical(b, i, run_begin, chain_end, config);
    // The slot's positions [0, chain_end) hold one chain: logical == physical.
    if (b.positions[i] == chain_end && b.kv_position(i) == chain_end) ++chain_end;
  }
  for (int r : b.logit_rows) check(r >= 0 && r < n, "forward: logit row {} outside the batch", r);
}

// Cache room for each slot's run, before any pass writes; the lengths advance
// after the last pass.
void reserve_forward_batch(const ForwardBatch& b, KVCache& cache) {
  for (int i = 0; i < b.size(); ++i)
    if (ends_run(b, i))
      check(cache.reserve(b.slots[i], b.kv_position(i) + 1),
            "forward: KV cache has no room for slot {} up to position {}", b.slots[i],
            b.kv_position(i));
}

void advance_forward_batch(const ForwardBatch& b, KVCache& cache) {
  for (int i = 0; i < b.size(); ++i)
    if (ends_run(b, i)) cache.set_length(b.slots[i], b.kv_position(i) + 1);
}

}  // namespace tandem
