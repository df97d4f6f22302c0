// Which token ids may come next: one bit per id.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem::structured {

class TokenMask {
 public:
  TokenMask() = default;
  explicit TokenMask(int n_ids) : n_(n_ids), words_((n_ids + 63) / 64, 0) {}

  int size() const { return n_; }
  void clear_all() { std::fill(words_.begin(), words_.end(), 0); }
  void set(int id) { words_[id >> 6] |= uint64_t{1} << (id & 63); }
  bool test(int id) const { return id >= 0 && id < n_ && ((words_[id >> 6] >> (id & 63)) & 1); }
  int count() const;
  std::vector<int> allowed_ids() const;
  bool operator==(const TokenMask& o) const = default;
  uint64_t* words() { return words_.data(); }
  const uint64_t* words() const { return words_.data(); }
  int n_words() const { return static_cast<int>(words_.size()); }

 private:
  int n_ = 0;
  std::vector<uint64_t> words_;
};

// Sets the logits of disallowed ids to -infinity (ids at or past mask.size()
// are disallowed too), so that every sampling transform and the draw that
// follow see only allowed tokens.
void apply_token_mask(const TokenMask& mask, float* logits, int n_logits);

}  // namespace tandem::structured
