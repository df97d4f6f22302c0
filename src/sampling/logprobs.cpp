#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem {
namespace {

// The top_n largest of n values (index, value), largest first; ties by index.
std::vector<TokenLogprob> largest(const float* v, int n, int top_n) {
  std::vector<TokenLogprob> best;
  if (top_n <= 0) return best;
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
  };
  for (int i = 0; i < n; ++i) {
    if (static_cast<int>(best.size()) == top_n && !(v[i] > best.back().logprob)) continue;
    const TokenLogprob c{i, v[i]};
    best.insert(std::upper_bound(best.begin(), best.end(), c, better), c);
    if (static_cast<int>(best.size()) > top_n) best.pop_back();
  }
  return best;
}

}  // namespace

TokenLogprobs token_logprobs(int token, const float* logits, int n_vocab,
                             const SamplingDistribution* p, int top_n) {
  TokenLogprobs out;
  if (p) {
    const std::vector<float>& probs = p->probs();
    out.chosen = {token, std::log(probs[token])};
    for (TokenLogprob& t : largest(probs.data(), n_vocab, top_n))
      if (t.logprob > 0) out.top.push_back({t.token, std::log(t.logprob)});
    return out;
  }
  // log softmax: l - max - log(sum(exp(l - max))).
  const float max = *std::max_element(logits, logits + n_vocab);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  out.chosen = {token, logits[token] - log_z};
  for (TokenLogprob& t : largest(logits, n_vocab, top_n))
    if (t.logprob > -std::numeric_limits<float>::infinity())
      out.top.push_back({t.token, t.logprob - log_z});
  return out;
}

}  // namespace tandem
