#include "speculative/suffix_index.h"

#include <algorithm>
#include <bit>

#include "core/error.h"

namespace tandem {

SuffixIndex::SuffixIndex(size_t budget, size_t heads) {
  check(budget > static_cast<size_t>(kAnchor), "the suffix index needs a budget above {} tokens",
        kAnchor);
  check(std::has_single_bit(heads) || heads == 0, "suffix index: {} heads is not a power of two",
        heads);
  ring_.assign(budget, 0);
  prev_.assign(budget, 0);
  // About one head per two positions: chains stay short, the table small.
  if (heads == 0) heads = std::max<size_t>(1024, std::bit_ceil(budget) / 2);
  head_.assign(heads, 0);
  hash_mask_ = heads - 1;
}

uint64_t SuffixIndex::anchor_hash(uint64_t tenant, const int* tokens) const {
  // A multiply-xorshift mix; the tenant is part of the key so that one tenant's
  // text does not crowd another's chains (isolation itself is checked exactly).
  uint64_t h = tenant * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (int i = 0; i < kAnchor; ++i) {
    h ^= static_cast<uint32_t>(tokens[i]);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return h & hash_mask_;
}

const SuffixIndex::Document& SuffixIndex::document_of(uint64_t p) const {
  auto it = std::upper_bound(docs_.begin(), docs_.end(), p,
                             [](uint64_t pos, const Document& d) { return pos < d.start; });
  return *std::prev(it);
}

void SuffixIndex::evict_until_room_for(size_t n) {
  while (!docs_.empty() && end_ + n - begin_ > ring_.size()) {
    docs_.pop_front();
    begin_ = docs_.empty() ? end_ : docs_.front().start;
  }
}

void SuffixIndex::add(uint64_t tenant, std::span<const int> tokens) {
  // Shorter text holds no anchor with a continuation: nothing to find in it.
  if (tokens.size() <= static_cast<size_t>(kAnchor)) return;
  const size_t n = std::min(tokens.size(), ring_.size());
  const std::span<const int> text = tokens.last(n);
  evict_until_room_for(n);
  const uint64_t start = end_;
  for (size_t i = 0; i < n; ++i) ring_[(start + i) % ring_.size()] = text[i];
  // Position p is found by the kAnchor tokens before it and continues with
  // token p: every p whose anchor lies in the document and that has a token.
  for (uint64_t p = start + kAnchor; p < start + n; ++p) {
    const uint64_t h = anchor_hash(tenant, text.data() + (p - start - kAnchor));
    prev_[p % ring_.size()] = head_[h];
    head_[h] = p + 1;
  }
  end_ = start + n;
  if (docs_.empty()) begin_ = start;
  docs_.push_back({start, end_, tenant});
}

SuffixIndex::Match SuffixIndex::lookup(uint64_t tenant, std::span<const int> context, int k,
                                       int min_match, std::vector<int>& out) const {
  out.clear();
  Match best;
  const int n = static_cast<int>(context.size());
  min_match = std::max(min_match, kAnchor);
  if (k <= 0 || n < min_match || docs_.empty()) return best;
  uint64_t best_pos = 0, best_end = 0;
  uint64_t link = head_[anchor_hash(tenant, context.data() + n - kAnchor)];
  for (int seen = 0; link != 0 && seen < kMaxCandidates; ++seen) {
    const uint64_t p = link - 1;
    // Chains run from newer to older positions: once one is evicted, so is the rest.
    if (!live(p)) break;
    link = prev_[p % ring_.size()];
    if (link != 0 && link - 1 >= p) link = 0;  // a slot reused since: the chain ends
    const Document& d = document_of(p);
    if (d.tenant != tenant) continue;
    const int most = static_cast<int>(std::min<uint64_t>(
        {static_cast<uint64_t>(kMaxMatch), static_cast<uint64_t>(n), p - d.start}));
    int len = 0;
    while (len < most && at(p - 1 - len) == context[n - 1 - len]) ++len;
    // A hash collision matches fewer than kAnchor tokens and is dropped here.
    if (len < min_match || len <= best.length) continue;
    best.length = len;
    best_pos = p;
    best_end = d.end;
    if (len == kMaxMatch) break;
  }
  if (best.length == 0) return best;
  const uint64_t take = std::min<uint64_t>(static_cast<uint64_t>(k), best_end - best_pos);
  for (uint64_t p = best_pos; p < best_pos + take; ++p) out.push_back(at(p));
  best.available = static_cast<int>(take);
  return best;
}

}  // namespace tandem
