// Paged KV cache: a shared pool of fixed-size blocks, each holding block_size
// positions of K and V for every layer, and a block table per slot. Slots cost
// only their table, so many can exist; storage is claimed block by block as
// sequences grow and returned when they shrink or end.
//
// Prefix caching: after a prompt's prefill the engine publishes the slot's full
// prompt blocks; a later request whose prompt starts with the same tokens
// attaches them instead of recomputing. Shared blocks are read-only: a slot's
// leading attached or published blocks are never written, truncated into, or
// copied (only full blocks are shared and attach never maps the block holding a
// prompt's last token, so a slot always continues in private blocks). Blocks
// nobody references stay cached until the free list runs out, then the least
// recently used is evicted.
#pragma once
#include <vector>

#include "cache/block_pool.h"
#include "cache/kv_cache.h"
#include "cache/prefix_index.h"

namespace tandem {

class PagedKVCache final : public KVCache {
 public:
  PagedKVCache(const KVCacheShape& shape, int n_slots, int n_blocks, int block_size,
               DType type = DType::F16);

  int allocate() override;
  void free(int slot) override;
  int length(int slot) const override;
  int capacity(int slot) const override;
  bool reserve(int slot, int new_len) override;
  void set_length(int slot, int len) override;
  void truncate_to(int slot, int new_len) override;
  void store(int slot, int layer, int pos, const float* k, const float* v) override;
  void move(int slot, int from, int to) override;
  KVSeqView view(int slot, int layer) const override;
  int64_t free_positions() const override;
  int64_t total_positions() const override;
  int64_t positions_needed(int slot, int new_len) const override;
  int attach_prefix(int slot, const std::vector<int>& tokens) override;
  void publish_prefix(int slot, const std::vector<int>& tokens) override;
  int cached_prefix(std::span<const int> tokens) const override;
  Stats stats() const override;

  int n_slots() const { return static_cast<int>(slots_.size()); }
  int block_size() const { return block_size_; }
  // The pool blocks backing a slot's positions, in order.
  const std::vector<int>& block_table(int slot) const;
  // Leading positions of a slot that live in shared (read-only) blocks.
  int shared_length(int slot) const;
  // Slots referencing a block, and the cached blocks least recently used first.
  int block_refs(int block) const;
  std::vector<int> cached_blocks_lru() const { return pool_.lru_order(); }
  // Keep only `bits` bits of the prefix hashes, to force collisions in tests.
  void set_hash_bits_for_testing(int bits) { index_.set_hash_bits_for_testing(bits); }

 private:
  struct Slot {
    bool used = false;
    int length = 0;
    int shared_blocks = 0;    // leading blocks that are in the prefix index
    std::vector<int> blocks;  // the block table
    // Block pointers for views, (layer, ptr_cap): rebuilt when the table outgrows ptr_cap.
    int ptr_cap = 0;
    std::vector<const void*> k_ptrs, v_ptrs;
  };

  // The indexed blocks that hold the start of `tokens`, in order, up to
  // max_blocks; fn(block) for each.
  template <class Fn>
  void walk_prefix(std::span<const int> tokens, int max_blocks, Fn&& fn) const;
  Slot& checked_slot(int slot, const char* what);
  const Slot& checked_slot(int slot, const char* what) const;
  // A block for a slot: from the free list, else by evicting the LRU cached block.
  int take_block();
  void push_block(Slot& s, int block);
  void set_block(Slot& s, int i, int block);  // replace table entry i and its pointers
  void pop_blocks(Slot& s, int keep);         // release blocks past the first `keep`
  uint8_t* k_row(int block, int layer, int row);
  uint8_t* v_row(int block, int layer, int row);

  int block_size_;
  size_t row_bytes_;    // one position of one layer's K (or V)
  size_t layer_bytes_;  // block_size rows
  BlockPool pool_;
  PrefixIndex index_;
  std::vector<Slot> slots_;
  std::vector<int> free_slots_;                   // stack; the lowest ids are handed out first
  int64_t prefix_queried_ = 0, prefix_hits_ = 0;  // Stats' attach_prefix counts
};

}  // namespace tandem
