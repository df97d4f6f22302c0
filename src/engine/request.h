// What a client asks for (a Request) and what it gets back (a RequestResult),
// independent of how the engine schedules the work.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace tandem {

struct RequestParams {
  int max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop_strings;
  bool ignore_eos = false;  // keep going past end-of-generation tokens
  bool speculate = true;    // let the engine's drafter propose tokens for this request
};

// Counters of one request; times in milliseconds.
struct RequestStats {
  int n_prompt = 0;
  int n_generated = 0;
  int rounds = 0;          // target forward passes after the prefill (decode steps or verifies)
  int spec_rounds = 0;     // rounds that verified at least one drafted token
  int drafted = 0;         // drafted tokens proposed to the target
  int accepted = 0;        // drafted tokens the target accepted
  int rejections = 0;      // rounds that ended by rejecting a draft
  double prefill_ms = 0, decode_ms = 0;
  double draft_ms = 0, verify_ms = 0;  // decode_ms = draft_ms + verify_ms + the rest
  double spec_verify_ms = 0;           // the part of verify_ms in rounds with drafts

  double acceptance_rate() const { return drafted ? double(accepted) / drafted : 0.0; }
  // Tokens emitted per round after the prefill (1 for plain decoding).
  double tokens_per_round() const {
    return rounds ? double(n_generated > 0 ? n_generated - 1 : 0) / rounds : 0.0;
  }
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
