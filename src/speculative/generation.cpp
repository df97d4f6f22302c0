#include "speculative/generation.h"

#include "core/error.h"

namespace tandem {

Generation::Generation(int id, std::vector<int> prompt, const DecodeParams& params)
    : id_(id),
      tokens_(std::move(prompt)),
      n_prompt_(static_cast<int>(tokens_.size())),
      params_(params),
      constraint_(params.constraint ? params.constraint->fork() : nullptr),
      rng_(params.sampling.seed) {
  check(n_prompt_ > 0, "empty prompt");
  check(params_.max_tokens >= 0, "max_tokens must be >= 0, got {}", params_.max_tokens);
  check(params_.logprobs >= -1, "logprobs must be >= -1, got {}", params_.logprobs);
  params_.sampling.validate();
  stats_.n_prompt = n_prompt_;
}

void Generation::append(int token) {
  tokens_.push_back(token);
  stats_.n_generated = n_generated();
  if (constraint_) constraint_->advance(token);
}

}  // namespace tandem
