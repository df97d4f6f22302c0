#include "spec/verifier.h"

#include <algorithm>
#include <memory>

#include "core/error.h"

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
                     const std::vector<int>& context, Rng& rng, const VerifyExtras& extras) {
  const int k = static_cast<int>(draft.tokens.size());
  // The repetition penalty of row i reads the last penalty_last_n tokens of the
  // context followed by drafts 0..i-1: only that window is copied, and nothing
  // without a penalty.
  std::vector<int> ctx;
  if (params.repetition_penalty != 1.0f) {
    const size_t n = context.size();
    const size_t window = params.penalty_last_n < 0 ? n : std::min(n, size_t(params.penalty_last_n));
    ctx.assign(context.end() - static_cast<std::ptrdiff_t>(window), context.end());
  }
  // The constraint's state before row i: forked, advanced through the drafts.
  std::unique_ptr<TokenConstraint> state = extras.constraint ? extras.constraint->fork() : nullptr;
  if (extras.logprobs) extras.logprobs->clear();
  SamplingDistribution p;
  // Row i emits `token`: report its log-probabilities if asked.
  auto report = [&](const float* row, int token) {
    if (extras.logprobs && extras.top_logprobs >= 0)
      extras.logprobs->push_back(token_logprobs(token, row, n_vocab,
                                                params.greedy() ? nullptr : &p,
                                                extras.top_logprobs));
  };
  for (int i = 0; i <= k; ++i) {
    float* row = logits + static_cast<size_t>(i) * n_vocab;
    apply_repetition_penalty(row, n_vocab, ctx.data(), static_cast<int>(ctx.size()), params);
    if (state) check(state->mask(row, n_vocab), "the output constraint allows no token");
    if (params.greedy()) {
      const int best = argmax(row, n_vocab);
      const bool last = i == k || best != draft.tokens[i];
      report(row, last ? best : draft.tokens[i]);
      if (last) return {i, best};
    } else {
      p.compute(row, n_vocab, params);
      if (i == k) {
        const int t = p.sample(rng);
        report(row, t);
        return {k, t};
      }
      const SamplingDistribution* q = draft.q.empty() ? nullptr : &draft.q[i];
      int correction = -1;
      const bool accepted = accept_or_resample(p, q, draft.tokens[i], rng, &correction);
      report(row, accepted ? draft.tokens[i] : correction);
      if (!accepted) return {i, correction};
    }
    if (params.repetition_penalty != 1.0f) ctx.push_back(draft.tokens[i]);
    if (state) state->advance(draft.tokens[i]);
  }
  return {k, -1};  // unreachable: the loop returns at i == k
}

}  // namespace tandem
