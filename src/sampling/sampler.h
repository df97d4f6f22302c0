// Turning logits into the next token. The pipeline, in order: repetition penalty,
// temperature, top-k, top-p, min-p, then a draw from the request's own Rng.
// Temperature 0 is greedy (argmax after the penalty).
//
// Speculative decoding needs the distribution itself, not just a token: the
// target's p and the draft's q must come from the same transforms so that
// rejection sampling reproduces exactly the distribution of plain sampling.
// Hence sampling_distribution() is separate from the draw.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sampling/rng.h"

namespace tandem {

struct SamplingParams {
  float temperature = 0.0f;         // 0: greedy
  int top_k = 0;                    // keep the k most likely tokens; 0: off
  float top_p = 1.0f;               // keep the smallest set with this much mass; 1: off
  float min_p = 0.0f;               // drop tokens below min_p * p(most likely); 0: off
  float repetition_penalty = 1.0f;  // > 1 discourages repeats; 1: off
  int penalty_last_n = 64;          // recent tokens the penalty looks at; -1: all of them
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
  // Throws tandem::Error naming the out-of-range field.
  void validate() const;
};

// Index of the largest value (the first one on ties). Throws tandem::Error when
// the logits hold NaN (a broken model must not emit garbage silently).
int argmax(const float* x, int n);

// Divide positive logits by the penalty and multiply negative ones, for every
// distinct token among the last penalty_last_n entries of context.
void apply_repetition_penalty(float* logits, int n_vocab, const int* context, int n_context,
                              const SamplingParams& p);

// The distribution a request samples from, as n_vocab probabilities (zero for
// tokens the filters removed; sums to 1). Greedy params give a point mass on the
// argmax. `logits` must already carry the repetition penalty.
class SamplingDistribution {
 public:
  void compute(const float* logits, int n_vocab, const SamplingParams& p);
  const std::vector<float>& probs() const { return probs_; }
  float operator[](int id) const { return probs_[static_cast<size_t>(id)]; }
  int n_vocab() const { return static_cast<int>(probs_.size()); }
  // A draw by inverse CDF with one uniform number.
  int sample(Rng& rng) const;

 private:
  void keep_top(const SamplingParams& p);  // top-k and top-p: zero all but the best

  std::vector<float> probs_;
  std::vector<int> order_;  // scratch: candidate ids sorted by probability
};

// Draw from arbitrary non-negative weights (need not sum to 1); the residual
// distribution of speculative sampling uses this. Throws when all are zero.
int sample_weights(const std::vector<float>& w, Rng& rng);

}  // namespace tandem
