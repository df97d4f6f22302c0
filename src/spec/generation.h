// One request as the speculative runner sees it: the tokens so far, where they
// live in the target's KV cache, how it samples, and a way to hand over the
// tokens a round keeps. Its owner (the engine's Sequence) decides when it ends:
// accept() applies the stop conditions (end-of-generation tokens, stop strings,
// the token limit), so speculative rounds and plain decode steps end requests
// the same way.
#pragma once
#include <vector>

#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "spec/draft_context.h"
#include "spec/request_stats.h"

namespace tandem {

class Generation {
 public:
  virtual ~Generation() = default;
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  int id() const { return id_; }
  // Prompt followed by every accepted generated token; the last one may not yet
  // be in the target's KV cache (it is fed in the next round).
  const std::vector<int>& tokens() const { return tokens_; }
  int n_prompt() const { return n_prompt_; }
  int n_generated() const { return static_cast<int>(tokens_.size()) - n_prompt_; }
  int remaining() const { return max_tokens_ - n_generated(); }
  // Where prefill stops: the whole prompt for a new request; after a preemption
  // every token but the last, which the next decode round feeds.
  int prefill_end() const {
    return n_generated() == 0 ? n_prompt_ : static_cast<int>(tokens_.size()) - 1;
  }
  const SamplingParams& sampling() const { return sampling_; }
  // Whether a drafter may propose tokens for it.
  bool speculate() const { return speculate_; }
  Rng& rng() { return rng_; }
  RequestStats& stats() { return stats_; }
  const RequestStats& stats() const { return stats_; }
  // What a drafter sees of it (valid until its tokens change).
  DraftContext draft_context() { return {id_, tokens_, &sampling_, &rng_}; }

  // Append one sampled token. Returns false when the request is finished; the
  // owner records why. A token that ends the request by a stop token is not
  // part of the output.
  virtual bool accept(int token) = 0;

  int target_slot = -1;  // its slot in the target model's KV cache (-1: none)

 protected:
  Generation(int id, std::vector<int> prompt, const SamplingParams& sampling, int max_tokens,
             bool speculate);
  void append(int token) {
    tokens_.push_back(token);
    stats_.n_generated = n_generated();
  }

 private:
  int id_;
  std::vector<int> tokens_;
  int n_prompt_;
  SamplingParams sampling_;
  int max_tokens_;
  bool speculate_;
  Rng rng_;
  RequestStats stats_;
};

}  // namespace tandem
