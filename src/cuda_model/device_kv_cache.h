// The KV cache of the CUDA forward pass: block tables, lengths and the prefix
// index on the host, the keys and values in device memory.
//
// The host side is a PagedKVCache, so allocation, reserve, truncate_to (the
// rollback after rejected drafts: a length change of the host table), prefix
// attach/publish and the scheduler's accounting are the CPU cache's own code.
// That cache is built over a one-value shape: its own storage (8 bytes per
// block position) is never read; the real K/V live in the device region, laid
// out per layer as the kernels expect (cuda::PagedKV: block b's rows at
// b * block_size in each layer's K pool and V pool). Block n_blocks is one more
// block, never in a table: the padding rows of a CUDA graph write and read it.
//
// store() and view() are the CPU pass's and throw here: only the CUDA kernels
// (kv_store, paged_attention) write and read device K/V. move() copies on the
// device, queued on the forward pass's stream.
#pragma once
#include <cstdint>
#include <vector>

#include "cache/kv_cache.h"
#include "cache/paged_kv_cache.h"
#include "cuda/cuda_kernels.h"

namespace tandem::cuda_model {

class DeviceKVCache final : public KVCache {
 public:
  // device: (n_blocks + 1) * device_block_bytes(shape, block_size, type) bytes
  // of device memory, owned by the caller. prefix_sharing: whether
  // attach_prefix/publish_prefix share blocks (a contiguous configuration on
  // the CPU has no prefix cache, and keeps none here).
  DeviceKVCache(const KVCacheShape& shape, int n_slots, int n_blocks, int block_size, DType type,
                uint8_t* device, cuda::Stream stream, bool prefix_sharing);

  static size_t device_block_bytes(const KVCacheShape& shape, int block_size, DType type);

  int allocate() override { return tables_.allocate(); }
  void free(int slot) override { tables_.free(slot); }
  int length(int slot) const override { return tables_.length(slot); }
  int capacity(int slot) const override { return tables_.capacity(slot); }
  bool reserve(int slot, int new_len) override { return tables_.reserve(slot, new_len); }
  void set_length(int slot, int len) override { tables_.set_length(slot, len); }
  void truncate_to(int slot, int new_len) override { tables_.truncate_to(slot, new_len); }
  void store(int slot, int layer, int pos, const float* k, const float* v) override;
  void move(int slot, int from, int to) override;
  KVSeqView view(int slot, int layer) const override;
  int64_t free_positions() const override { return tables_.free_positions(); }
  int64_t total_positions() const override { return tables_.total_positions(); }
  int64_t positions_needed(int slot, int new_len) const override {
    return tables_.positions_needed(slot, new_len);
  }
  int attach_prefix(int slot, const std::vector<int>& tokens) override {
    return prefix_sharing_ ? tables_.attach_prefix(slot, tokens) : 0;
  }
  void publish_prefix(int slot, const std::vector<int>& tokens) override {
    if (prefix_sharing_) tables_.publish_prefix(slot, tokens);
  }
  Stats stats() const override { return tables_.stats(); }

  const std::vector<int>& block_table(int slot) const { return tables_.block_table(slot); }
  int block_size() const { return tables_.block_size(); }
  int n_blocks() const { return n_blocks_; }
  int pad_block() const { return n_blocks_; }  // the padding rows' block
  // Layer l's pools, as the kernels take them.
  cuda::PagedKV layer(int l) const;

 private:
  PagedKVCache tables_;
  int n_blocks_;
  uint8_t* device_;
  size_t row_bytes_;   // one position of one layer's K (or V)
  size_t pool_bytes_;  // one layer's K (or V) pool: (n_blocks + 1) * block_size rows
  cuda::Stream stream_;
  bool prefix_sharing_;
};

}  // namespace tandem::cuda_model
