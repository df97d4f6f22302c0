#include "cache/contiguous_kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "quant/quants.h"

namespace tandem {

ContiguousKVCache::ContiguousKVCache(const KVCacheShape& shape, int n_slots, int n_ctx, DType type)
    : n_ctx_(n_ctx) {
  check(type == DType::F32 || type == DType::F16, "KV cache type must be F32 or F16, got {}",
        dtype_name(type));
  check(n_slots > 0 && n_ctx > 0, "KV cache needs at least one slot and position");
  shape_ = shape;
  type_ = type;
  row_bytes_ = dtype_row_bytes(type, shape.row_elems());
  size_t total = static_cast<size_t>(n_slots) * shape.n_layers * n_ctx * row_bytes_;
  k_.resize(total);
  v_.resize(total);
  lengths_.assign(n_slots, 0);
  used_.assign(n_slots, false);
  for (int s = 0; s < n_slots; ++s)
    for (int l = 0; l < shape.n_layers; ++l) {
      k_ptrs_.push_back(row(k_, s, l, 0));
      v_ptrs_.push_back(row(v_, s, l, 0));
    }
}

uint8_t* ContiguousKVCache::row(std::vector<uint8_t>& buf, int slot, int layer, int pos) {
  size_t idx = (static_cast<size_t>(slot) * shape_.n_layers + layer) * n_ctx_ + pos;
  return buf.data() + idx * row_bytes_;
}

void ContiguousKVCache::check_slot(int slot) const {
  check(slot >= 0 && slot < n_slots() && used_[slot], "KV cache: slot {} is not allocated", slot);
}

int ContiguousKVCache::allocate() {
  for (int s = 0; s < n_slots(); ++s)
    if (!used_[s]) {
      used_[s] = true;
      lengths_[s] = 0;
      return s;
    }
  return -1;
}

void ContiguousKVCache::free(int slot) {
  check_slot(slot);
  used_[slot] = false;
  lengths_[slot] = 0;
}

int ContiguousKVCache::length(int slot) const {
  check_slot(slot);
  return lengths_[slot];
}

bool ContiguousKVCache::reserve(int slot, int new_len) {
  check_slot(slot);
  return new_len <= n_ctx_;
}

void ContiguousKVCache::set_length(int slot, int len) {
  check_slot(slot);
  check(len >= 0 && len <= n_ctx_, "KV cache: length {} outside [0, {}]", len, n_ctx_);
  lengths_[slot] = len;
}

void ContiguousKVCache::truncate_to(int slot, int new_len) {
  check_slot(slot);
  check(new_len >= 0 && new_len <= lengths_[slot],
        "KV cache: cannot truncate slot {} of length {} to {}", slot, lengths_[slot], new_len);
  lengths_[slot] = new_len;
}

void ContiguousKVCache::store(int slot, int layer, int pos, const float* k, const float* v) {
  uint8_t* kd = row(k_, slot, layer, pos);
  uint8_t* vd = row(v_, slot, layer, pos);
  quantize_row(type_, k, kd, shape_.row_elems());
  quantize_row(type_, v, vd, shape_.row_elems());
}

void ContiguousKVCache::move(int slot, int from, int to) {
  check_slot(slot);
  const int len = lengths_[slot];
  check(from >= 0 && from < len && to >= 0 && to < len,
        "KV cache: move: slot {} positions {} -> {} outside its length {}", slot, from, to, len);
  if (from == to) return;
  for (int l = 0; l < shape_.n_layers; ++l) {
    std::memcpy(row(k_, slot, l, to), row(k_, slot, l, from), row_bytes_);
    std::memcpy(row(v_, slot, l, to), row(v_, slot, l, from), row_bytes_);
  }
}

int64_t ContiguousKVCache::free_positions() const {
  return static_cast<int64_t>(std::count(used_.begin(), used_.end(), false)) * n_ctx_;
}

int64_t ContiguousKVCache::total_positions() const { return int64_t{n_slots()} * n_ctx_; }

KVCache::Stats ContiguousKVCache::stats() const {
  Stats s;
  s.block_size = n_ctx_;  // one block per slot
  s.blocks_total = n_slots();
  s.blocks_used = std::count(used_.begin(), used_.end(), true);
  return s;
}

KVSeqView ContiguousKVCache::view(int slot, int layer) const {
  size_t idx = static_cast<size_t>(slot) * shape_.n_layers + layer;
  return {&k_ptrs_[idx], &v_ptrs_[idx], n_ctx_, type_};
}

}  // namespace tandem
