// What a client asks for (a Request) and what it gets back (a RequestResult),
// independent of how the engine schedules the work.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "speculative/generation.h"
#include "speculative/request_stats.h"

namespace tandem {

// Why a request ended.
enum class FinishReason {
  None,       // it has not
  Stop,       // an end-of-generation token or a stop string
  Length,     // max_tokens
  Cancelled,  // by its client (or a shutdown that does not wait)
  Error,      // the engine failed and gave up on it
};
// "stop", "length", "cancelled", "error" ("" for None): OpenAI's names where it has them.
const char* finish_reason_name(FinishReason reason);

struct RequestResult {
  std::vector<int> tokens;  // generated ids; the stop token and anything after a stop excluded
  std::string text;
  FinishReason finish_reason = FinishReason::None;
  RequestStats stats;
  // One per generated token when params.logprobs >= 0.
  std::vector<TokenLogprobs> logprobs;
};

// One generated token as it is streamed, or (id -1) text that became final
// without one: what was held back when the request ended (by a stop token, a
// stop string, or a cancellation).
struct TokenOutput {
  int id = -1;
  bool drafted = false;  // an accepted draft token (false: the target's own)
  // The text that became final with this token (may be empty: an incomplete
  // UTF-8 sequence, or text held back while it may still start a stop string).
  // The pieces of all outputs, in order, are the output text.
  std::string text;
  const TokenLogprobs* logprobs = nullptr;  // when asked for (params.logprobs >= 0)
  const RequestStats* stats = nullptr;      // the request's figures so far
};

// A request the engine runs: its prompt and parameters, checked where it entered
// (engine/request_check.h; the engine trusts them), and where its output goes.
struct Request {
  std::vector<int> prompt;
  GenerationParams params;
  // Streaming: called with each piece of final text as soon as it is complete UTF-8.
  std::function<void(const std::string&)> on_text;
  // Streaming, token by token: called for every generated token (after on_text
  // for the same text), with what it made final and how it was produced, and
  // for text that becomes final without a token.
  std::function<void(const TokenOutput&)> on_token;
  // Called once when the request finishes (also when cancelled), from the thread
  // that runs the engine.
  std::function<void(const RequestResult&)> on_finish;
};

}  // namespace tandem
