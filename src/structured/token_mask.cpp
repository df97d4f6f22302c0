#include "structured/token_mask.h"

#include <bit>
#include <limits>

namespace tandem::structured {

int TokenMask::count() const {
  int c = 0;
  for (uint64_t w : words_) c += std::popcount(w);
  return c;
}

std::vector<int> TokenMask::allowed_ids() const {
  std::vector<int> ids;
  for (int w = 0; w < n_words(); ++w)
    for (uint64_t bits = words_[w]; bits; bits &= bits - 1)
      ids.push_back(w * 64 + std::countr_zero(bits));
  return ids;
}

void apply_token_mask(const TokenMask& mask, float* logits, int n_logits) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int n = std::min(n_logits, mask.size());
  for (int w = 0; w * 64 < n; ++w) {
    const uint64_t bits = mask.words()[w];
    if (bits == ~uint64_t{0}) continue;
    const int end = std::min(n, w * 64 + 64);
    for (int id = w * 64; id < end; ++id)
      if (!((bits >> (id - w * 64)) & 1)) logits[id] = kNegInf;
  }
  for (int id = n; id < n_logits; ++id) logits[id] = kNegInf;
}

}  // namespace tandem::structured
