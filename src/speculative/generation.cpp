#include "speculative/generation.h"

#include <algorithm>

namespace tandem {

Generation::Generation(int id, std::vector<int> prompt, GenerationParams params)
    : id_(id),
      tokens_(std::move(prompt)),
      n_prompt_(static_cast<int>(tokens_.size())),
      params_(std::move(params)),
      constraint_(params_.constraint ? params_.constraint->fork() : nullptr),
      rng_(params_.sampling.seed) {
  // Room for every token it may generate: appending never reallocates.
  tokens_.reserve(tokens_.size() + static_cast<size_t>(std::max(params_.max_tokens, 0)));
  stats_.n_prompt = n_prompt_;
}

void Generation::append(int token) {
  tokens_.push_back(token);
  stats_.n_generated = n_generated();
  if (constraint_) constraint_->advance(token);
}

}  // namespace tandem
