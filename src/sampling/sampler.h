// Turning logits into the next token. The pipeline, in order: repetition penalty,
// temperature, top-k, top-p, min-p, then a draw: in reproducible mode the
// Gumbel-max choice with noise keyed by (seed, position, token)
// (sampling/gumbel_sampler.h), in optimal mode an inverse-CDF draw from the
// request's own Rng stream. Temperature 0 is greedy (argmax after the penalty).
//
// Speculative decoding needs the distribution itself, not just a token: the
// target's p and the draft's q must come from the same transforms so that
// rejection sampling reproduces exactly the distribution of plain sampling.
// Hence sampling_distribution() is separate from the draw.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/rng.h"

namespace tandem {

// How a sampled request draws its tokens; both draw exactly from the request's
// distribution, with speculation as without. They differ in what else holds:
// - Reproducible: each position's draw is a function of (seed, position, the
//   target's row) alone (sampling/gumbel_sampler.h), so a seed gives the same
//   tokens whatever the drafter, K, tree, batch, thread count or timing. A drafted
//   token is accepted iff it is the target's own choice: per position at least
//   (1 - TV) / (1 + TV) of the time, TV the total-variation distance of p and q.
// - Optimal: rejection sampling against the draft's q (Leviathan et al. 2023),
//   whose acceptance 1 - TV is the most any lossless verifier reaches; its draws
//   come from one stream per request, so the tokens depend on how many draws the
//   drafter and verifier made before.
// Greedy requests (temperature 0) are the same in both.
enum class SamplingMode { Reproducible, Optimal };

// "reproducible" or "optimal".
const char* sampling_mode_name(SamplingMode mode);
// The mode of that name; throws tandem::Error naming the value otherwise.
SamplingMode parse_sampling_mode(const std::string& name);

struct SamplingParams {
  float temperature = 0.0f;         // 0: greedy
  int top_k = 0;                    // keep the k most likely tokens; 0: off
  float top_p = 1.0f;               // keep the smallest set with this much mass; 1: off
  float min_p = 0.0f;               // drop tokens below min_p * p(most likely); 0: off
  float repetition_penalty = 1.0f;  // > 1 discourages repeats; 1: off
  int penalty_last_n = 64;          // recent tokens the penalty looks at; -1: all of them
  uint64_t seed = 0;
  SamplingMode mode = SamplingMode::Reproducible;

  bool greedy() const { return temperature <= 0.0f; }
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
  // Room for a vocabulary of n_vocab: compute() then allocates nothing.
  void reserve(int n_vocab) {
    probs_.reserve(static_cast<size_t>(n_vocab));
    order_.reserve(static_cast<size_t>(n_vocab));
  }

 private:
  void keep_top(const SamplingParams& p);  // top-k and top-p: zero all but the best

  std::vector<float> probs_;
  std::vector<int> order_;  // scratch: candidate ids sorted by probability
};

// Draw from arbitrary non-negative weights (need not sum to 1); the residual
// distribution of speculative sampling uses this. Throws when all are zero.
int sample_weights(const std::vector<float>& w, Rng& rng);

}  // namespace tandem
