// Index of KV blocks that hold full blocks of prompt tokens, for prefix caching.
// A block is keyed by a chain hash of the WHOLE token prefix up to its end:
// hash(parent's hash, the block's tokens). Hashes only narrow the search: a hit
// also compares the block's own tokens and requires its parent to be the block
// matched one step earlier, so by induction the whole prefix is verified and a
// hash collision can never return a wrong block.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace tandem {

class PrefixIndex {
 public:
  static constexpr uint64_t kRootHash = 0x5d1c0f3b9a7e2468ull;  // the empty prefix

  PrefixIndex(int n_blocks, int block_size);

  int block_size() const { return block_size_; }
  // Hash of a prefix extended by one block of block_size tokens.
  uint64_t chain_hash(uint64_t parent_hash, const int* tokens) const;

  // The indexed block with this hash whose parent is `parent` (-1: the root) and
  // whose tokens equal `tokens`; -1 when there is none.
  int find(uint64_t hash, int parent, const int* tokens) const;
  // Register `block` (not yet indexed) under `hash` as the child of `parent`
  // (an indexed block, or -1 for the root), holding `tokens`.
  void insert(int block, uint64_t hash, int parent, const int* tokens);
  // Unregister an indexed block. Its children stay indexed but can no longer be
  // reached: they name a parent generation that no longer exists.
  void erase(int block);

  bool contains(int block) const { return entries_[block].indexed; }
  uint64_t hash_of(int block) const { return entries_[block].hash; }
  const int* tokens_of(int block) const {
    return &tokens_[static_cast<size_t>(block) * block_size_];
  }
  int size() const { return static_cast<int>(by_hash_.size()); }

  // Keep only the low `bits` bits of every hash (0: all hashes collide), so tests
  // can show that collisions are resolved by comparing tokens.
  void set_hash_bits_for_testing(int bits);

 private:
  struct Entry {
    bool indexed = false;
    uint64_t hash = 0;
    int parent = -1;
    uint32_t parent_generation = 0;
    uint32_t generation = 0;  // bumped on erase, so stale children never match
  };
  bool same_tokens(int block, const int* tokens) const;

  int block_size_;
  uint64_t hash_mask_ = ~uint64_t{0};
  std::vector<Entry> entries_;
  std::vector<int> tokens_;  // (n_blocks, block_size): the tokens of indexed blocks
  std::unordered_multimap<uint64_t, int> by_hash_;
};

}  // namespace tandem
