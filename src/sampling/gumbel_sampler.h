// Reproducible sampling (SamplingMode::Reproducible). The token a request takes
// at position n (its index in the sequence) is
//
//   argmax over the tokens the transforms keep of  log p(i) + g(seed, n, i),
//
// where p is the request's distribution over that row (penalty, mask,
// temperature, top-k, top-p, min-p, as SamplingDistribution computes it) and g
// is Gumbel noise keyed by (seed, position, token) (kernels/gumbel_noise.h). By
// the Gumbel-max trick that is exactly a draw from p; and it is a function of the
// seed and the row alone. Since log p(i) is (logit(i) - max) / T up to a constant
// over the kept tokens, the choice needs no softmax unless a filter must decide
// which tokens are kept.
//
// Speculative decoding keeps it whatever the drafter (Daliri, Musco, Suresh,
// "Coupling without Communication and Drafter-Invariant Speculative Decoding",
// arXiv 2408.07978): a draft model proposes its own Gumbel winner under q with the
// same noise, and the target accepts a drafted token iff it equals the target's
// winner, which is otherwise the correction. The output is then the same tokens as
// plain sampling with that seed: bit for bit, since the target's rows are (batch
// invariance).
#pragma once
#include <cstdint>
#include <vector>

#include "sampling/sampler.h"

namespace tandem {

class GumbelSampler {
 public:
  // The token of one row of n_vocab logits (penalty and mask applied) at
  // `position`. `exclude` (or -1) is a token left out of the choice (a draft's
  // runner-up beside its first choice); its logit is restored before returning.
  // Greedy params give the argmax.
  int choose(float* logits, int n_vocab, const SamplingParams& p, int64_t position,
             int exclude = -1);
  // The probability p(token) of the request's distribution over the row (a
  // draft's confidence in what it proposed).
  float probability(const float* logits, int n_vocab, const SamplingParams& p, int token);
  // Room for a vocabulary of n_vocab: choices then allocate nothing.
  void reserve(int n_vocab) {
    dist_.reserve(n_vocab);
    ids_.reserve(static_cast<size_t>(n_vocab));
    kept_.reserve(static_cast<size_t>(n_vocab));
  }

 private:
  SamplingDistribution dist_;  // when a filter decides the kept tokens
  std::vector<int> ids_;       // the kept tokens, ascending
  std::vector<float> kept_;    // their logits
};

}  // namespace tandem
