#include "spec/generation.h"

#include "core/error.h"

namespace tandem {

Generation::Generation(int id, std::vector<int> prompt, const SamplingParams& sampling,
                       int max_tokens, bool speculate)
    : id_(id),
      tokens_(std::move(prompt)),
      n_prompt_(static_cast<int>(tokens_.size())),
      sampling_(sampling),
      max_tokens_(max_tokens),
      speculate_(speculate),
      rng_(sampling.seed) {
  check(n_prompt_ > 0, "empty prompt");
  check(max_tokens_ >= 0, "max_tokens must be >= 0, got {}", max_tokens_);
  sampling_.validate();
  stats_.n_prompt = n_prompt_;
}

}  // namespace tandem
