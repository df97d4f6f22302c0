#include "cache/paged_kv_cache.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "quant/quants.h"

namespace tandem {
namespace {

// Bytes of one block: for each layer, block_size rows of K then block_size rows of V.
size_t checked_block_bytes(const KVCacheShape& shape, int n_slots, int n_blocks, int block_size,
                           DType type) {
  check(type == DType::F32 || type == DType::F16, "paged KV cache: type must be F32 or F16, got {}",
        dtype_name(type));
  check(shape.n_layers > 0 && shape.n_kv_heads > 0 && shape.head_dim > 0,
        "paged KV cache: bad shape: {} layers, {} KV heads, head_dim {}", shape.n_layers,
        shape.n_kv_heads, shape.head_dim);
  check(n_slots > 0, "paged KV cache: n_slots must be positive, got {}", n_slots);
  check(n_blocks > 0, "paged KV cache: n_blocks must be positive, got {}", n_blocks);
  check(block_size > 0, "paged KV cache: block_size must be positive, got {}", block_size);
  check(int64_t{n_blocks} * block_size <= std::numeric_limits<int>::max(),
        "paged KV cache: {} blocks of {} positions exceed {} positions", n_blocks, block_size,
        std::numeric_limits<int>::max());
  return 2 * size_t(shape.n_layers) * size_t(block_size) * dtype_row_bytes(type, shape.row_elems());
}

int blocks_for(int positions, int block_size) {
  return static_cast<int>((int64_t{positions} + block_size - 1) / block_size);
}

}  // namespace

PagedKVCache::PagedKVCache(const KVCacheShape& shape, int n_slots, int n_blocks, int block_size,
                           DType type)
    : block_size_(block_size),
      pool_(n_blocks, checked_block_bytes(shape, n_slots, n_blocks, block_size, type)),
      index_(n_blocks, block_size),
      slots_(n_slots) {
  shape_ = shape;
  type_ = type;
  row_bytes_ = dtype_row_bytes(type, shape.row_elems());
  layer_bytes_ = row_bytes_ * block_size;
  free_slots_.reserve(n_slots);
  for (int s = n_slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

PagedKVCache::Slot& PagedKVCache::checked_slot(int slot, const char* what) {
  check(slot >= 0 && slot < n_slots() && slots_[slot].used,
        "paged KV cache: {}: slot {} is not allocated", what, slot);
  return slots_[slot];
}

const PagedKVCache::Slot& PagedKVCache::checked_slot(int slot, const char* what) const {
  check(slot >= 0 && slot < n_slots() && slots_[slot].used,
        "paged KV cache: {}: slot {} is not allocated", what, slot);
  return slots_[slot];
}

uint8_t* PagedKVCache::k_row(int block, int layer, int row) {
  return pool_.data(block) + (2 * size_t(layer)) * layer_bytes_ + size_t(row) * row_bytes_;
}

uint8_t* PagedKVCache::v_row(int block, int layer, int row) {
  return pool_.data(block) + (2 * size_t(layer) + 1) * layer_bytes_ + size_t(row) * row_bytes_;
}

int PagedKVCache::allocate() {
  if (free_slots_.empty()) return -1;
  int slot = free_slots_.back();
  free_slots_.pop_back();
  Slot& s = slots_[slot];
  s.used = true;
  s.length = 0;
  s.shared_blocks = 0;
  return slot;
}

void PagedKVCache::free(int slot) {
  Slot& s = checked_slot(slot, "free");
  pop_blocks(s, 0);
  s.used = false;
  s.length = 0;
  s.shared_blocks = 0;
  free_slots_.push_back(slot);
}

int PagedKVCache::length(int slot) const { return checked_slot(slot, "length").length; }

int PagedKVCache::capacity(int slot) const {
  checked_slot(slot, "capacity");
  return pool_.n_blocks() * block_size_;
}

int PagedKVCache::take_block() {
  if (pool_.n_free() > 0) return pool_.take_free();
  int b = pool_.take_lru();
  index_.erase(b);
  return b;
}

void PagedKVCache::set_block(Slot& s, int i, int block) {
  s.blocks[i] = block;
  for (int l = 0; l < shape_.n_layers; ++l) {
    s.k_ptrs[size_t(l) * s.ptr_cap + i] = k_row(block, l, 0);
    s.v_ptrs[size_t(l) * s.ptr_cap + i] = v_row(block, l, 0);
  }
}

void PagedKVCache::push_block(Slot& s, int block) {
  const int n = static_cast<int>(s.blocks.size());
  if (n == s.ptr_cap) {
    // Grow geometrically so appending a block is amortized O(n_layers).
    s.ptr_cap = std::max(4, 2 * s.ptr_cap);
    s.k_ptrs.assign(size_t(shape_.n_layers) * s.ptr_cap, nullptr);
    s.v_ptrs.assign(size_t(shape_.n_layers) * s.ptr_cap, nullptr);
    for (int i = 0; i < n; ++i) set_block(s, i, s.blocks[i]);
  }
  s.blocks.push_back(block);
  set_block(s, n, block);
}

void PagedKVCache::pop_blocks(Slot& s, int keep) {
  // Deepest first: a chain's later blocks then reach the LRU list before its
  // earlier ones and are evicted first.
  while (static_cast<int>(s.blocks.size()) > keep) {
    pool_.release(s.blocks.back());
    s.blocks.pop_back();
  }
}

bool PagedKVCache::reserve(int slot, int new_len) {
  Slot& s = checked_slot(slot, "reserve");
  check(new_len >= 0, "paged KV cache: reserve: slot {} length {} is negative", slot, new_len);
  if (new_len > capacity(slot)) return false;
  const int extra = blocks_for(new_len, block_size_) - static_cast<int>(s.blocks.size());
  if (extra <= 0) return true;
  if (extra > pool_.n_available()) return false;
  for (int i = 0; i < extra; ++i) push_block(s, take_block());
  return true;
}

void PagedKVCache::set_length(int slot, int len) {
  Slot& s = checked_slot(slot, "set_length");
  const int reserved = static_cast<int>(s.blocks.size()) * block_size_;
  check(len >= 0 && len <= reserved,
        "paged KV cache: set_length: slot {} length {} outside the reserved [0, {}]", slot, len,
        reserved);
  check(len >= s.shared_blocks * block_size_,
        "paged KV cache: set_length: slot {} length {} would cut into its shared prefix of {} "
        "positions",
        slot, len, s.shared_blocks * block_size_);
  s.length = len;
}

void PagedKVCache::truncate_to(int slot, int new_len) {
  Slot& s = checked_slot(slot, "truncate_to");
  check(new_len >= 0 && new_len <= s.length,
        "paged KV cache: cannot truncate slot {} of length {} to {}", slot, s.length, new_len);
  check(new_len >= s.shared_blocks * block_size_,
        "paged KV cache: cannot truncate slot {} to {}: positions below {} are in shared "
        "prefix blocks",
        slot, new_len, s.shared_blocks * block_size_);
  s.length = new_len;
  pop_blocks(s, blocks_for(new_len, block_size_));
}

void PagedKVCache::store(int slot, int layer, int pos, const float* k, const float* v) {
  Slot& s = checked_slot(slot, "store");
  check(layer >= 0 && layer < shape_.n_layers, "paged KV cache: store: layer {} outside [0, {})",
        layer, shape_.n_layers);
  const int reserved = static_cast<int>(s.blocks.size()) * block_size_;
  check(pos >= 0 && pos < reserved,
        "paged KV cache: store: slot {} position {} outside the reserved [0, {})", slot, pos,
        reserved);
  const int i = pos / block_size_, b = s.blocks[i];
  // Only full prompt blocks are shared and slots continue past them, so a write
  // into a shared block is a caller bug that would corrupt other sequences.
  check(i >= s.shared_blocks && pool_.refs(b) == 1 && !index_.contains(b),
        "paged KV cache: store: slot {} position {} is in shared prefix block {} (read-only; "
        "the slot's first {} positions are shared)",
        slot, pos, b, s.shared_blocks * block_size_);
  const int row = pos % block_size_;
  quantize_row(type_, k, k_row(b, layer, row), shape_.row_elems());
  quantize_row(type_, v, v_row(b, layer, row), shape_.row_elems());
}

// The target must be in a block this slot owns alone: a shared prefix block is
// read-only (other sequences read it).
void PagedKVCache::move(int slot, int from, int to) {
  Slot& s = checked_slot(slot, "move");
  check(from >= 0 && from < s.length && to >= 0 && to < s.length,
        "paged KV cache: move: slot {} positions {} -> {} outside its length {}", slot, from, to,
        s.length);
  if (from == to) return;
  const int i = to / block_size_, dst = s.blocks[i], src = s.blocks[from / block_size_];
  check(i >= s.shared_blocks && pool_.refs(dst) == 1 && !index_.contains(dst),
        "paged KV cache: move: slot {} position {} is in shared prefix block {} (read-only; "
        "the slot's first {} positions are shared)",
        slot, to, dst, s.shared_blocks * block_size_);
  const int from_row = from % block_size_, to_row = to % block_size_;
  for (int l = 0; l < shape_.n_layers; ++l) {
    std::memcpy(k_row(dst, l, to_row), k_row(src, l, from_row), row_bytes_);
    std::memcpy(v_row(dst, l, to_row), v_row(src, l, from_row), row_bytes_);
  }
}

KVSeqView PagedKVCache::view(int slot, int layer) const {
  const Slot& s = checked_slot(slot, "view");
  check(layer >= 0 && layer < shape_.n_layers, "paged KV cache: view: layer {} outside [0, {})",
        layer, shape_.n_layers);
  const size_t offset = size_t(layer) * s.ptr_cap;
  return {s.k_ptrs.data() + offset, s.v_ptrs.data() + offset, block_size_, type_};
}

int64_t PagedKVCache::free_positions() const { return int64_t{pool_.n_available()} * block_size_; }

int64_t PagedKVCache::positions_needed(int slot, int new_len) const {
  const Slot& s = checked_slot(slot, "positions_needed");
  const int64_t blocks = (int64_t{new_len} + block_size_ - 1) / block_size_;
  return std::max<int64_t>(0, blocks - static_cast<int64_t>(s.blocks.size())) * block_size_;
}

int64_t PagedKVCache::total_positions() const { return int64_t{pool_.n_blocks()} * block_size_; }

template <class Fn>
void PagedKVCache::walk_prefix(std::span<const int> tokens, int max_blocks, Fn&& fn) const {
  uint64_t hash = PrefixIndex::kRootHash;
  int parent = -1;
  for (int i = 0; i < max_blocks; ++i) {
    const int* block_tokens = tokens.data() + size_t(i) * block_size_;
    hash = index_.chain_hash(hash, block_tokens);
    const int b = index_.find(hash, parent, block_tokens);
    if (b < 0) return;
    fn(b);
    parent = b;
  }
}

namespace {
// Never the block holding the last token: its logits must be computed.
int attachable_blocks(size_t n_tokens, int block_size) {
  return n_tokens > 0 ? static_cast<int>((n_tokens - 1) / static_cast<size_t>(block_size)) : 0;
}
}  // namespace

int PagedKVCache::attach_prefix(int slot, const std::vector<int>& tokens) {
  Slot& s = checked_slot(slot, "attach_prefix");
  check(s.length == 0 && s.blocks.empty(),
        "paged KV cache: attach_prefix: slot {} is not empty (length {}, {} blocks)", slot,
        s.length, s.blocks.size());
  walk_prefix(tokens, attachable_blocks(tokens.size(), block_size_), [&](int b) {
    pool_.acquire(b);
    push_block(s, b);
  });
  s.shared_blocks = static_cast<int>(s.blocks.size());
  s.length = s.shared_blocks * block_size_;
  prefix_queried_ += static_cast<int64_t>(tokens.size());
  prefix_hits_ += s.length;
  return s.length;
}

int PagedKVCache::cached_prefix(std::span<const int> tokens) const {
  int blocks = 0;
  walk_prefix(tokens, attachable_blocks(tokens.size(), block_size_), [&](int) { ++blocks; });
  return blocks * block_size_;
}

void PagedKVCache::publish_prefix(int slot, const std::vector<int>& tokens) {
  Slot& s = checked_slot(slot, "publish_prefix");
  const int n_tokens = static_cast<int>(tokens.size());
  check(n_tokens <= s.length,
        "paged KV cache: publish_prefix: slot {} holds {} positions, cannot publish {} tokens",
        slot, s.length, n_tokens);
  const int n_full = n_tokens / block_size_;  // a partly filled last block stays private
  uint64_t hash = PrefixIndex::kRootHash;
  int parent = -1;
  for (int i = 0; i < n_full; ++i) {
    const int* block_tokens = tokens.data() + size_t(i) * block_size_;
    hash = index_.chain_hash(hash, block_tokens);
    if (i < s.shared_blocks) {  // attached or published before: must hold these tokens
      check(index_.hash_of(s.blocks[i]) == hash &&
                std::equal(block_tokens, block_tokens + block_size_, index_.tokens_of(s.blocks[i])),
            "paged KV cache: publish_prefix: slot {} block {} (positions {}..{}) holds other "
            "tokens than the ones published",
            slot, i, i * block_size_, (i + 1) * block_size_ - 1);
    } else {
      const int mine = s.blocks[i];
      const int existing = index_.find(hash, parent, block_tokens);
      if (existing >= 0) {
        // Another slot published the same prefix first: share its block and drop
        // ours (same tokens at the same positions, so the same K/V).
        pool_.acquire(existing);
        set_block(s, i, existing);
        pool_.release(mine);
      } else {
        index_.insert(mine, hash, parent, block_tokens);
        pool_.set_keep(mine, true);
      }
    }
    parent = s.blocks[i];
  }
  s.shared_blocks = std::max(s.shared_blocks, n_full);
}

KVCache::Stats PagedKVCache::stats() const {
  Stats st;
  st.block_size = block_size_;
  st.blocks_total = pool_.n_blocks();
  st.blocks_cached = pool_.n_cached();
  st.blocks_used = st.blocks_total - pool_.n_free() - pool_.n_cached();
  st.prefix_queried_tokens = prefix_queried_;
  st.prefix_hit_tokens = prefix_hits_;
  return st;
}

const std::vector<int>& PagedKVCache::block_table(int slot) const {
  return checked_slot(slot, "block_table").blocks;
}

int PagedKVCache::shared_length(int slot) const {
  return checked_slot(slot, "shared_length").shared_blocks * block_size_;
}

int PagedKVCache::block_refs(int block) const {
  check(block >= 0 && block < pool_.n_blocks(), "paged KV cache: block {} outside [0, {})", block,
        pool_.n_blocks());
  return pool_.refs(block);
}

}  // namespace tandem
