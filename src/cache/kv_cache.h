// KV cache interface: per-sequence slots holding the keys and values of every
// layer at every position written so far. The forward pass appends at the end
// of a slot; speculative decoding rolls back with truncate_to.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/kv_view.h"

namespace tandem {

struct KVCacheShape {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int row_elems() const { return n_kv_heads * head_dim; }  // one position of one layer
};

class KVCache {
 public:
  virtual ~KVCache() = default;

  virtual int allocate() = 0;       // a free slot id, or -1 when none is free
  virtual void free(int slot) = 0;  // releases the slot and its storage
  virtual int length(int slot) const = 0;
  virtual int capacity(int slot) const = 0;  // positions the slot can hold at most
  // Ensure positions [0, new_len) have storage (may allocate blocks); false when
  // the cache has no room left.
  virtual bool reserve(int slot, int new_len) = 0;
  // Record that positions [0, len) hold valid entries (len <= reserved length).
  virtual void set_length(int slot, int len) = 0;
  // Drop entries at positions >= new_len (rollback after rejected drafts).
  virtual void truncate_to(int slot, int new_len) = 0;
  // Write K and V (row_elems floats each) for one position of one layer.
  virtual void store(int slot, int layer, int pos, const float* k, const float* v) = 0;
  // Copy the K and V of every layer at position `from` to position `to` (both
  // below length(slot)). After a drafted tree's verification the runner moves
  // the accepted nodes, in depth order, to the positions of a chain, then
  // truncates the rest.
  virtual void move(int slot, int from, int to) = 0;
  // View of a slot's K/V in one layer for the attention kernel.
  virtual KVSeqView view(int slot, int layer) const = 0;

  // Positions that can still be reserved across all slots, and in all. The
  // scheduler admits and preempts requests by these.
  virtual int64_t free_positions() const = 0;
  virtual int64_t total_positions() const = 0;
  // Free positions that reserve(slot, new_len) would take (whole blocks).
  virtual int64_t positions_needed(int slot, int new_len) const = 0;

  // Prefix caching; caches without it keep these defaults.
  // Map into an empty slot the longest run of cached full blocks whose tokens
  // equal the start of `tokens` (never the block holding the last token, whose
  // logits the caller still needs). Returns the positions now valid: prefill
  // starts there.
  virtual int attach_prefix(int slot, const std::vector<int>& tokens) { return 0; }
  // Offer the slot's full blocks that hold the first tokens.size() positions
  // to the prefix cache: settled text only, never drafts (the engine publishes
  // prompts; a draft model the text it caught up on, all of it final).
  virtual void publish_prefix(int slot, const std::vector<int>& tokens) {}
  // The positions attach_prefix(slot, tokens) would map now, without mapping them.
  virtual int cached_prefix(std::span<const int> tokens) const { return 0; }

  struct Stats {
    int64_t blocks_total = 0, blocks_used = 0;  // used: referenced by some slot
    int64_t blocks_cached = 0;                  // unreferenced but kept for prefix reuse
    int block_size = 0;
    // attach_prefix's lookups since the cache was made: the tokens looked up,
    // and the positions they mapped (prefill or catch-up skipped).
    int64_t prefix_queried_tokens = 0, prefix_hit_tokens = 0;
  };
  virtual Stats stats() const = 0;

  const KVCacheShape& shape() const { return shape_; }
  DType type() const { return type_; }

 protected:
  KVCacheShape shape_;
  DType type_ = DType::F16;
};

}  // namespace tandem
