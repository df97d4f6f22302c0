// The state of one request while the engine works on it: its tokens so far, its
// KV cache slot, its random generator and its stop handling. Every accepted
// token goes through accept(), which applies the stop conditions, so speculative
// rounds and plain decode steps end requests the same way.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "sampling/rng.h"
#include "spec/adaptive_k.h"

namespace tandem {

class Model;
class TextStream;

class Sequence {
 public:
  Sequence(int id, const Model& model, Request request);
  ~Sequence();

  int id() const { return id_; }
  const RequestParams& params() const { return request_.params; }
  // Prompt followed by every accepted generated token; the last one may not yet
  // be in the target's KV cache (it is fed in the next round).
  const std::vector<int>& tokens() const { return tokens_; }
  int n_prompt() const { return n_prompt_; }
  int n_generated() const { return static_cast<int>(tokens_.size()) - n_prompt_; }
  int remaining() const { return params().max_tokens - n_generated(); }
  // Where prefill stops: the whole prompt for a new request; after a preemption
  // every token but the last, which the next decode round feeds.
  int prefill_end() const {
    return n_generated() == 0 ? n_prompt_ : static_cast<int>(tokens_.size()) - 1;
  }

  // Append one sampled token. Returns false (and records why) when the request is
  // finished: an end-of-generation token, a stop string, or the token limit. A
  // token that ends the request by a stop token is not part of the output.
  bool accept(int token);
  bool finished() const { return !finish_reason_.empty(); }
  const std::string& finish_reason() const { return finish_reason_; }
  void cancel();  // finish with reason "cancelled"
  void abort(const std::string& reason);  // finish with another reason (e.g. "error")

  Rng& rng() { return rng_; }
  RequestStats& stats() { return stats_; }
  const RequestStats& stats() const { return stats_; }

  // Engine bookkeeping.
  using Clock = std::chrono::steady_clock;
  int target_slot = -1;           // KV cache slot in the target model's cache (-1: none)
  uint64_t admitted_order = 0;    // preemption takes the most recently admitted first
  bool prefix_published = false;  // its prompt blocks are in the prefix cache
  Clock::time_point submitted_at = Clock::now(), last_token_at;
  // Of this request's drafts, for adaptive K. A slow fade (a window of ~30 judged
  // drafts): a short window reads a few unlucky rounds as a change of text and
  // stops drafting where acceptance is high on the whole (measured: Qwen pair on
  // code, fade 0.9 lost 7% against the best fixed K).
  AcceptanceEstimate acceptance{0.97};
  int rounds_since_draft = 0;     // decode rounds since it last had drafts verified
  int failed_probes = 0;          // probes in a row after which drafting still did not pay

  // The final result (call once finished).
  RequestResult result();
  // Deliver the result to the request's on_finish callback; false when it has none.
  bool notify_finished(const RequestResult& r) const;

 private:
  void emit_ready_text();

  int id_;
  const Model& model_;
  Request request_;
  std::vector<int> tokens_;
  int n_prompt_;
  Rng rng_;
  std::unique_ptr<TextStream> text_;
  std::string finish_reason_;
  RequestStats stats_;
};

}  // namespace tandem
