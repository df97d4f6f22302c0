#include "sampling/gumbel_sampler.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/gumbel_noise.h"
#include "kernels/kernels.h"
#include "sampling/sampler.h"

namespace tandem {
namespace {

bool filters(const SamplingParams& p) { return p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f; }

kernels::NoiseKey noise_key(const SamplingParams& p, int64_t position) {
  check(position >= 0 && position <= int64_t{UINT32_MAX}, "sampling position {} out of range",
        position);
  return {p.seed, static_cast<uint32_t>(position)};
}

}  // namespace

int GumbelSampler::choose(float* logits, int n_vocab, const SamplingParams& p, int64_t position,
                          int exclude) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  const float excluded = exclude >= 0 ? logits[exclude] : kNone;
  if (exclude >= 0) logits[exclude] = kNone;
  const int best = argmax(logits, n_vocab);
  int token = best;
  if (!p.greedy() && logits[best] != kNone) {
    const float max_logit = logits[best], inv_t = 1.0f / p.temperature;
    const kernels::NoiseKey key = noise_key(p, position);
    if (!filters(p)) {
      token = kernels::gumbel_argmax(logits, nullptr, n_vocab, max_logit, inv_t, key, best);
    } else {
      // The filters decide which tokens are kept; among them log p is the
      // scaled logit up to a constant.
      dist_.compute(logits, n_vocab, p);
      ids_.clear();
      kept_.clear();
      int hint = 0;
      for (int i = 0; i < n_vocab; ++i) {
        if (dist_[i] <= 0.0f) continue;
        if (i == best) hint = static_cast<int>(ids_.size());
        ids_.push_back(i);
        kept_.push_back(logits[i]);
      }
      const int at = kernels::gumbel_argmax(
          kept_.data(), ids_.data(), static_cast<int>(ids_.size()), max_logit, inv_t, key, hint);
      token = at < 0 ? best : ids_[static_cast<size_t>(at)];
    }
  }
  if (exclude >= 0) logits[exclude] = excluded;
  return token;
}

float GumbelSampler::probability(const float* logits, int n_vocab, const SamplingParams& p,
                                 int token) {
  if (filters(p) || p.greedy()) {
    // Greedy: the plain softmax (temperature 1), as the draft's confidence is
    // read for greedy requests.
    SamplingParams plain = p;
    if (p.greedy()) plain = SamplingParams{.temperature = 1.0f};
    dist_.compute(logits, n_vocab, plain);
    return dist_[token];
  }
  // p(token) = exp((l_token - l_max) / T) / sum_i exp((l_i - l_max) / T), in
  // float: a draft's confidence (the draft policy's reading, not an output).
  const float top = logits[argmax(logits, n_vocab)], inv_t = 1.0f / p.temperature;
  const float sum = kernels::sum_exp(logits, n_vocab, top, inv_t);
  return sum > 0 && std::isfinite(sum) ? std::exp((logits[token] - top) * inv_t) / sum : 0.0f;
}

}  // namespace tandem
