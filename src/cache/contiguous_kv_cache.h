// Contiguous slotted cache: every slot owns n_ctx positions for every layer,
// allocated up front. Simple and fast for a few sequences; no prefix caching.
#pragma once
#include "cache/kv_cache.h"

namespace tandem {

class ContiguousKVCache final : public KVCache {
 public:
  ContiguousKVCache(const KVCacheShape& shape, int n_slots, int n_ctx, DType type = DType::F16);

  int allocate() override;
  void free(int slot) override;
  int length(int slot) const override;
  int capacity(int slot) const override { return n_ctx_; }
  bool reserve(int slot, int new_len) override;
  void set_length(int slot, int len) override;
  void truncate_to(int slot, int new_len) override;
  void store(int slot, int layer, int pos, const float* k, const float* v) override;
  void move(int slot, int from, int to) override;
  KVSeqView view(int slot, int layer) const override;
  int64_t free_positions() const override;
  int64_t total_positions() const override;
  // A slot owns its n_ctx positions from allocation on.
  int64_t positions_needed(int, int) const override { return 0; }
  Stats stats() const override;

  int n_slots() const { return static_cast<int>(lengths_.size()); }

 private:
  uint8_t* row(std::vector<uint8_t>& buf, int slot, int layer, int pos);
  void check_slot(int slot) const;

  int n_ctx_;
  size_t row_bytes_;
  std::vector<uint8_t> k_, v_;                // (slot, layer, n_ctx, row_elems)
  std::vector<const void*> k_ptrs_, v_ptrs_;  // (slot, layer): block pointer for views
  std::vector<int> lengths_;
  std::vector<bool> used_;
};

}  // namespace tandem
