#include "spec/verifier.h"

#include <algorithm>

namespace tandem {

bool accept_or_resample(const SamplingDistribution& p, const SamplingDistribution* q, int token,
                        Rng& rng, int* correction) {
  const double pt = p[token];
  const double qt = q ? (*q)[token] : 1.0;
  // u < p/q accepts with probability min(1, p/q); qt > 0 because token was drawn from q.
  if (qt > 0 && rng.uniform() * qt < pt) return true;
  std::vector<float> residual(p.probs());
  if (q) {
    for (size_t i = 0; i < residual.size(); ++i)
      residual[i] = std::max(0.0f, residual[i] - q->probs()[i]);
  } else {
    residual[token] = 0.0f;
  }
  bool any = std::any_of(residual.begin(), residual.end(), [](float x) { return x > 0; });
  // p <= q everywhere can only happen through float rounding (both sum to 1):
  // then p itself is the right distribution to draw from.
  *correction = any ? sample_weights(residual, rng) : p.sample(rng);
  return false;
}

Verdict verify_draft(float* logits, int n_vocab, const Draft& draft, const SamplingParams& params,
                     const std::vector<int>& context, Rng& rng) {
  const int k = static_cast<int>(draft.tokens.size());
  std::vector<int> ctx = context;
  SamplingDistribution p;
  for (int i = 0; i <= k; ++i) {
    float* row = logits + static_cast<size_t>(i) * n_vocab;
    apply_repetition_penalty(row, n_vocab, ctx.data(), static_cast<int>(ctx.size()), params);
    if (params.greedy()) {
      int best = argmax(row, n_vocab);
      if (i == k || best != draft.tokens[i]) return {i, best};
    } else {
      p.compute(row, n_vocab, params);
      if (i == k) return {k, p.sample(rng)};
      const SamplingDistribution* q = draft.q.empty() ? nullptr : &draft.q[i];
      int correction = -1;
      if (!accept_or_resample(p, q, draft.tokens[i], rng, &correction)) return {i, correction};
    }
    ctx.push_back(draft.tokens[i]);
  }
  return {k, -1};  // unreachable: the loop returns at i == k
}

}  // namespace tandem
