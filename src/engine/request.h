// What a client asks for (a Request) and what it gets back (a RequestResult),
// independent of how the engine schedules the work.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "spec/request_stats.h"

namespace tandem {

struct RequestParams {
  int max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;  // keep going past end-of-generation tokens
  bool speculate = true;    // let the engine's drafter propose tokens for this request
};

struct RequestResult {
  std::vector<int> tokens;    // generated ids; the stop token and anything after a stop excluded
  std::string text;
  std::string finish_reason;  // "stop", "length" or "cancelled"
  RequestStats stats;
};

struct Request {
  std::vector<int> prompt;
  RequestParams params;
  // Streaming: called with each piece of final text as soon as it is complete UTF-8.
  std::function<void(const std::string&)> on_text;
  // Called once when the request finishes (also when cancelled), from the thread
  // that runs the engine.
  std::function<void(const RequestResult&)> on_finish;
};

}  // namespace tandem
