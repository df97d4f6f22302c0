#include "spec/ngram_drafter.h"

#include <algorithm>

#include "engine/sequence.h"

namespace tandem {

std::vector<int> NgramDrafter::lookup(const std::vector<int>& tokens, int k, int max_n) {
  const int len = static_cast<int>(tokens.size());
  if (k <= 0) return {};
  for (int n = std::min(max_n, len - 1); n >= 1; --n) {
    const int* tail = tokens.data() + len - n;
    // Most recent earlier occurrence: its match must end before the tail starts
    // ending, i.e. start at most len - n - 1.
    for (int start = len - n - 1; start >= 0; --start) {
      if (!std::equal(tail, tail + n, tokens.data() + start)) continue;
      const int from = start + n;
      const int take = std::min(k, len - from);
      return {tokens.begin() + from, tokens.begin() + from + take};
    }
  }
  return {};
}

void NgramDrafter::propose(const std::vector<Sequence*>& seqs, const std::vector<int>& k,
                           std::vector<Draft>& out) {
  out.resize(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    out[i].clear();
    out[i].tokens = lookup(seqs[i]->tokens(), k[i], max_n_);
  }
}

}  // namespace tandem
