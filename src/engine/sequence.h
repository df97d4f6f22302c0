// The engine's record of one request: the generation the speculative runner
// works on (speculative/generation.h: its tokens and parameters), plus what only
// the engine knows of it: where its output goes, its streamed text, how it
// finished, and its place in the schedule.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "engine/request.h"
#include "speculative/generation.h"

namespace tandem {

class Model;
class TextStream;

class Sequence final : public Generation {
 public:
  Sequence(int id, const Model& model, Request request);
  ~Sequence() override;

  // Append one sampled token, applying the stop conditions: an end-of-generation
  // token, a stop string, the token limit.
  using Generation::accept;
  bool accept(const EmittedToken& token) override;
  bool finished() const { return finish_reason_ != FinishReason::None; }
  FinishReason finish_reason() const { return finish_reason_; }
  void cancel() { abort(FinishReason::Cancelled); }
  void abort(FinishReason reason);  // finish now with this reason (unless finished already)

  // Engine bookkeeping.
  using Clock = std::chrono::steady_clock;
  uint64_t admitted_order = 0;    // preemption takes the most recently admitted first
  bool prefix_published = false;  // its prompt blocks are in the prefix cache
  Clock::time_point submitted_at = Clock::now(), last_token_at;

  // The final result (call once finished).
  RequestResult result();
  // Deliver the result to the request's on_finish callback; false when it has none.
  bool notify_finished(const RequestResult& r) const;

 private:
  // Stream the text that became final (with the token that made it so, if any).
  void emit_ready_text(const EmittedToken* token);
  void emit(std::string piece, const EmittedToken* token);

  const Model& model_;
  // Where the output goes (the request's callbacks); its prompt and parameters
  // live in the Generation.
  std::function<void(const std::string&)> on_text_;
  std::function<void(const TokenOutput&)> on_token_;
  std::function<void(const RequestResult&)> on_finish_;
  std::unique_ptr<TextStream> text_;
  FinishReason finish_reason_ = FinishReason::None;
  std::vector<TokenLogprobs> logprobs_;  // of each generated token, when asked for
};

}  // namespace tandem
