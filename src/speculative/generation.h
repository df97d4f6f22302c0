// One request as the speculative runner sees it: the tokens so far, where they
// live in the target's KV cache, how it samples, and a way to hand over the
// tokens a round keeps. Its owner (the engine's Sequence) decides when it ends:
// accept() applies the stop conditions (end-of-generation tokens, stop strings,
// the token limit), so speculative rounds and plain decode steps end requests
// the same way.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "sampling/constraint.h"
#include "sampling/logprobs.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "speculative/draft_context.h"
#include "speculative/request_stats.h"

namespace tandem {

// Every parameter of a request: how it decodes and when it stops. Stored once,
// in its Generation; checked once, where the request enters (engine/request_check.h).
struct GenerationParams {
  int max_tokens = 128;
  SamplingParams sampling;
  bool speculate = true;  // let the engine's drafter propose tokens for this request
  // -1: none; n >= 0: each emitted token's log-probability (sampling/logprobs.h)
  // and the n most likely alternatives.
  int logprobs = -1;
  // The grammar its output must follow, in its start state (null: none); each
  // request advances a fork of its own.
  std::shared_ptr<const TokenConstraint> constraint;
  std::vector<std::string> stop_strings;  // text that ends the output (not part of it)
  // Special tokens whose text goes into the output text (others write none): a
  // tool-call format's markers, which the server reads the calls by.
  std::vector<int> text_special_tokens;
  bool ignore_eos = false;  // keep going past end-of-generation tokens
  // Whose text may be drafted for it, and whose its own text becomes
  // (DraftContext::tenant); 0: the one shared tenant of a server without keys.
  uint64_t tenant = 0;
};

// One token a round hands to its request.
struct EmittedToken {
  int id = -1;
  bool drafted = false;                     // an accepted draft token (false: the target's own)
  const TokenLogprobs* logprobs = nullptr;  // when the request asked for them
};

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
  int remaining() const { return params_.max_tokens - n_generated(); }
  // Where prefill stops: the whole prompt for a new request; after a preemption
  // every token but the last, which the next decode round feeds.
  int prefill_end() const {
    return n_generated() == 0 ? n_prompt_ : static_cast<int>(tokens_.size()) - 1;
  }
  const GenerationParams& params() const { return params_; }
  const SamplingParams& sampling() const { return params_.sampling; }
  // Whether a drafter may propose tokens for it.
  bool speculate() const { return params_.speculate; }
  // Alternatives wanted with each token's log-probability (-1: no log-probabilities).
  int top_logprobs() const { return params_.logprobs; }
  // The constraint's state after every accepted token (null: unconstrained).
  const TokenConstraint* constraint() const { return constraint_.get(); }
  Rng& rng() { return rng_; }
  RequestStats& stats() { return stats_; }
  const RequestStats& stats() const { return stats_; }
  // What a drafter sees of it (valid until its tokens change).
  DraftContext draft_context() {
    return {id_, tokens_, &params_.sampling, &rng_, constraint_.get(), params_.tenant};
  }

  // Hand over one token of the output. Returns false when the request is
  // finished; the owner records why. A token that ends the request by a stop
  // token is not part of the output.
  virtual bool accept(const EmittedToken& token) = 0;
  bool accept(int token) { return accept(EmittedToken{token}); }

  int target_slot = -1;  // its slot in the target model's KV cache (-1: none)

 protected:
  // The parameters are trusted: checked where the request entered.
  Generation(int id, std::vector<int> prompt, GenerationParams params);
  // Make `token` part of the output (and advance the constraint by it).
  void append(int token);

 private:
  int id_;
  std::vector<int> tokens_;
  int n_prompt_;
  GenerationParams params_;
  std::unique_ptr<TokenConstraint> constraint_;
  Rng rng_;
  RequestStats stats_;
};

}  // namespace tandem
