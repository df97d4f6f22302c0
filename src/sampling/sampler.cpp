#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "core/error.h"
#include "kernels/kernels.h"

namespace tandem {

const char* sampling_mode_name(SamplingMode mode) {
  return mode == SamplingMode::Reproducible ? "reproducible" : "optimal";
}

SamplingMode parse_sampling_mode(const std::string& name) {
  if (name == "reproducible") return SamplingMode::Reproducible;
  if (name == "optimal") return SamplingMode::Optimal;
  fail("unknown sampling mode '{}' (expected reproducible or optimal)", name);
}

int argmax(const float* x, int n) {
  const int best = kernels::argmax(x, n);
  if (best < 0)
    for (int i = 0; i < n; ++i)
      if (std::isnan(x[i])) fail("the model produced NaN logits (token {})", i);
  return best;
}

void apply_repetition_penalty(float* logits, int n_vocab, const int* context, int n_context,
                              const SamplingParams& p) {
  if (p.repetition_penalty == 1.0f || n_context <= 0) return;
  int from = p.penalty_last_n < 0 ? 0 : std::max(0, n_context - p.penalty_last_n);
  std::unordered_set<int> seen;
  for (int i = from; i < n_context; ++i) {
    int id = context[i];
    if (id < 0 || id >= n_vocab || !seen.insert(id).second) continue;
    float& l = logits[id];
    l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
  }
}

void SamplingDistribution::compute(const float* logits, int n_vocab, const SamplingParams& p) {
  probs_.assign(static_cast<size_t>(n_vocab), 0.0f);
  if (p.greedy()) {
    probs_[argmax(logits, n_vocab)] = 1.0f;
    return;
  }
  // Softmax of logits / temperature over the whole vocabulary.
  const float max_logit = logits[argmax(logits, n_vocab)];
  const float inv_t = 1.0f / p.temperature;
  double total = 0.0;
  for (int i = 0; i < n_vocab; ++i) {
    float e = std::exp((logits[i] - max_logit) * inv_t);
    probs_[i] = e;
    total += e;
  }
  for (auto& x : probs_) x = static_cast<float>(x / total);
  if (p.top_k > 0 || p.top_p < 1.0f) keep_top(p);
  if (p.min_p > 0.0f) {
    const float floor = p.min_p * *std::max_element(probs_.begin(), probs_.end());
    for (auto& x : probs_)
      if (x < floor) x = 0.0f;
  }
  if (p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f) {
    double kept = 0.0;
    for (float x : probs_) kept += x;
    for (auto& x : probs_) x = static_cast<float>(x / kept);
  }
}

void SamplingDistribution::keep_top(const SamplingParams& p) {
  // Sort only as many candidates as the filters can keep: top_k of them, or a
  // growing prefix until it holds top_p of the mass.
  const int n_vocab = static_cast<int>(probs_.size());
  order_.resize(probs_.size());
  for (int i = 0; i < n_vocab; ++i) order_[i] = i;
  auto by_prob = [&](int a, int b) {
    return probs_[a] > probs_[b] || (probs_[a] == probs_[b] && a < b);
  };
  int keep = p.top_k > 0 ? std::min(p.top_k, n_vocab) : n_vocab;
  int sorted = p.top_p < 1.0f ? std::min(keep, 64) : keep;
  for (;;) {
    std::partial_sort(order_.begin(), order_.begin() + sorted, order_.end(), by_prob);
    if (p.top_p >= 1.0f) break;
    double mass = 0.0;
    int cut = -1;
    for (int i = 0; i < sorted && cut < 0; ++i) {
      mass += probs_[order_[i]];
      if (mass >= p.top_p) cut = i + 1;
    }
    if (cut > 0) keep = cut;
    if (cut > 0 || sorted == keep) break;
    sorted = std::min(keep, sorted * 4);
  }
  for (int i = keep; i < n_vocab; ++i) probs_[order_[i]] = 0.0f;
}

int sample_weights(const std::vector<float>& w, Rng& rng) {
  double total = 0.0;
  for (float x : w) total += x;
  check(total > 0.0, "cannot sample from an all-zero distribution");
  const double u = rng.uniform() * total;
  double acc = 0.0;
  int last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0f) continue;
    acc += w[i];
    last = static_cast<int>(i);
    if (u < acc) return last;
  }
  return last;  // rounding left u at the very top: the last non-zero entry
}

int SamplingDistribution::sample(Rng& rng) const { return sample_weights(probs_, rng); }

}  // namespace tandem
