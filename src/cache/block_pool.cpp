#include "cache/block_pool.h"

#include <limits>

#include "core/error.h"

namespace tandem {

BlockPool::BlockPool(int n_blocks, size_t block_bytes) : block_bytes_(block_bytes) {
  check(n_blocks > 0, "block pool: n_blocks must be positive, got {}", n_blocks);
  check(block_bytes > 0, "block pool: block size in bytes must be positive");
  check(block_bytes <= std::numeric_limits<size_t>::max() / static_cast<size_t>(n_blocks),
        "block pool: {} blocks of {} bytes overflow the address space", n_blocks, block_bytes);
  // Default-initialized: pages are committed only when first written.
  storage_.reset(new uint8_t[static_cast<size_t>(n_blocks) * block_bytes]);
  blocks_.resize(n_blocks);
  free_.reserve(n_blocks);
  for (int b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int BlockPool::take_free() {
  check(!free_.empty(), "block pool: no free block");
  int b = free_.back();
  free_.pop_back();
  blocks_[b].refs = 1;
  return b;
}

int BlockPool::take_lru() {
  check(lru_head_ >= 0, "block pool: no cached block to evict");
  int b = lru_head_;
  lru_unlink(b);
  blocks_[b].refs = 1;
  blocks_[b].keep = false;
  return b;
}

void BlockPool::acquire(int b) {
  Block& blk = blocks_[b];
  if (blk.refs == 0) {
    check(blk.keep, "block pool: block {} is free and cannot gain a reference", b);
    lru_unlink(b);
  }
  ++blk.refs;
}

void BlockPool::release(int b) {
  Block& blk = blocks_[b];
  check(blk.refs > 0, "block pool: block {} released more often than acquired", b);
  if (--blk.refs > 0) return;
  if (blk.keep)
    lru_push_back(b);
  else
    free_.push_back(b);
}

void BlockPool::set_keep(int b, bool keep) {
  check(blocks_[b].refs > 0, "block pool: block {} must be in use to change its keep flag", b);
  blocks_[b].keep = keep;
}

std::vector<int> BlockPool::lru_order() const {
  std::vector<int> order;
  for (int b = lru_head_; b >= 0; b = blocks_[b].lru_next) order.push_back(b);
  return order;
}

void BlockPool::lru_unlink(int b) {
  Block& blk = blocks_[b];
  (blk.lru_prev >= 0 ? blocks_[blk.lru_prev].lru_next : lru_head_) = blk.lru_next;
  (blk.lru_next >= 0 ? blocks_[blk.lru_next].lru_prev : lru_tail_) = blk.lru_prev;
  blk.lru_prev = blk.lru_next = -1;
  --n_cached_;
}

void BlockPool::lru_push_back(int b) {
  Block& blk = blocks_[b];
  blk.lru_prev = lru_tail_;
  blk.lru_next = -1;
  (lru_tail_ >= 0 ? blocks_[lru_tail_].lru_next : lru_head_) = b;
  lru_tail_ = b;
  ++n_cached_;
}

}  // namespace tandem
