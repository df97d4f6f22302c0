// A pool of equally sized memory blocks with reference counts. A block is in one
// of three states:
//   free:    unreferenced, on the free stack, holds nothing of value;
//   in use:  referenced by one or more owners (refs > 0);
//   cached:  unreferenced but marked `keep` (its contents may be reused later),
//            on a least-recently-used list, evictable when the free stack is empty.
// Every operation is O(1).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tandem {

class BlockPool {
 public:
  BlockPool(int n_blocks, size_t block_bytes);

  int n_blocks() const { return static_cast<int>(blocks_.size()); }
  size_t block_bytes() const { return block_bytes_; }
  uint8_t* data(int block) { return storage_.get() + static_cast<size_t>(block) * block_bytes_; }
  const uint8_t* data(int block) const {
    return storage_.get() + static_cast<size_t>(block) * block_bytes_;
  }

  int n_free() const { return static_cast<int>(free_.size()); }
  int n_cached() const { return n_cached_; }
  // Blocks that take_free / take_lru can still hand out.
  int n_available() const { return n_free() + n_cached_; }

  // A free block, now referenced once. Requires n_free() > 0.
  int take_free();
  // The least recently used cached block, now referenced once and no longer
  // kept (the caller drops whatever index pointed at it). Requires n_cached() > 0.
  int take_lru();

  // Add a reference; a cached block leaves the LRU list.
  void acquire(int block);
  // Drop a reference; at zero the block becomes cached (most recently used) when
  // kept, else free.
  void release(int block);

  int refs(int block) const { return blocks_[block].refs; }
  bool kept(int block) const { return blocks_[block].keep; }
  // Mark an in-use block as worth keeping after its last release, or not.
  void set_keep(int block, bool keep);

  // The cached blocks, least recently used first (for tests and debugging).
  std::vector<int> lru_order() const;

 private:
  struct Block {
    int refs = 0;
    bool keep = false;
    int lru_prev = -1, lru_next = -1;  // links in the LRU list while cached
  };
  void lru_unlink(int block);
  void lru_push_back(int block);

  size_t block_bytes_;
  std::unique_ptr<uint8_t[]> storage_;  // n_blocks * block_bytes, uninitialized
  std::vector<Block> blocks_;
  std::vector<int> free_;  // stack; the lowest ids are handed out first
  int lru_head_ = -1, lru_tail_ = -1;
  int n_cached_ = 0;
};

}  // namespace tandem
