// The one place a request's parameters are checked. The server and the CLI build
// a Request at their edge and call check_request before handing it over; the
// engine, the scheduler and the speculative round trust what they are given.
// A failure is a RequestError naming the field (by its OpenAI API name) and a
// reason the server maps to its error codes.
#pragma once
#include <cstdint>
#include <string>

#include "engine/request.h"

namespace tandem {

// Stop strings: at most this many, each at most this long (streaming holds
// back as much text as the longest could span).
constexpr int kMaxStopStrings = 16;
constexpr size_t kMaxStopStringBytes = 1024;

// What a request must keep within: the engine's (Engine::limits()) and the
// edge's own, with the names the edge gives the fields.
struct RequestLimits {
  int vocab_size = 0;
  int n_ctx = 0;                            // positions one request may use: prompt + generated
  int64_t kv_positions = 0;                 // positions of the whole KV cache
  int max_prompt_tokens = 0;                // a longer prompt is refused; 0: what fits the context
  int max_top_logprobs = 20;                // alternatives per position with log-probabilities
  std::string prompt_field = "prompt";      // "messages" for chat
  std::string logprobs_field = "logprobs";  // chat: "top_logprobs"
};

// Throws RequestError for a request that cannot run as asked: an empty prompt,
// a token outside the vocabulary, prompt + max_tokens beyond the context or the
// KV cache, max_tokens < 1, a sampling parameter out of range, too many or
// too long stop strings, more log-probability alternatives than allowed, or
// ignore_eos with an output constraint.
void check_request(const Request& request, const RequestLimits& limits);

// The sampling parameters alone (part of check_request), for front ends that
// take them before they have a prompt.
void check_sampling(const SamplingParams& sampling);

}  // namespace tandem
