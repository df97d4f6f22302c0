#include "cache/prefix_index.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {
namespace {

// splitmix64's finalizer: every input bit affects every output bit.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

PrefixIndex::PrefixIndex(int n_blocks, int block_size)
    : block_size_(block_size),
      entries_(n_blocks),
      tokens_(static_cast<size_t>(n_blocks) * block_size) {
  by_hash_.reserve(n_blocks);
}

uint64_t PrefixIndex::chain_hash(uint64_t parent_hash, const int* tokens) const {
  uint64_t h = mix64(parent_hash + 0x9e3779b97f4a7c15ull);
  for (int i = 0; i < block_size_; ++i)
    h = mix64(h ^ static_cast<uint32_t>(tokens[i])) + 0x9e3779b97f4a7c15ull;
  return h & hash_mask_;
}

bool PrefixIndex::same_tokens(int block, const int* tokens) const {
  return std::equal(tokens, tokens + block_size_, tokens_of(block));
}

int PrefixIndex::find(uint64_t hash, int parent, const int* tokens) const {
  auto [it, end] = by_hash_.equal_range(hash);
  for (; it != end; ++it) {
    const int b = it->second;
    const Entry& e = entries_[b];
    if (e.parent != parent) continue;
    if (parent >= 0 && e.parent_generation != entries_[parent].generation) continue;
    if (same_tokens(b, tokens)) return b;
  }
  return -1;
}

void PrefixIndex::insert(int block, uint64_t hash, int parent, const int* tokens) {
  Entry& e = entries_[block];
  check(!e.indexed, "prefix index: block {} is already indexed", block);
  check(parent < 0 || entries_[parent].indexed, "prefix index: parent block {} is not indexed",
        parent);
  e.indexed = true;
  e.hash = hash;
  e.parent = parent;
  e.parent_generation = parent >= 0 ? entries_[parent].generation : 0;
  std::copy(tokens, tokens + block_size_, &tokens_[static_cast<size_t>(block) * block_size_]);
  by_hash_.emplace(hash, block);
}

void PrefixIndex::erase(int block) {
  Entry& e = entries_[block];
  check(e.indexed, "prefix index: block {} is not indexed", block);
  auto [it, end] = by_hash_.equal_range(e.hash);
  for (; it != end; ++it)
    if (it->second == block) {
      by_hash_.erase(it);
      break;
    }
  e.indexed = false;
  ++e.generation;
}

void PrefixIndex::set_hash_bits_for_testing(int bits) {
  check(bits >= 0 && bits <= 64, "prefix index: hash bits {} outside [0, 64]", bits);
  check(by_hash_.empty(), "prefix index: change the hash width only while the index is empty");
  hash_mask_ = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

}  // namespace tandem
