// A client for any OpenAI-compatible server's streamed chat completions, for
// benchmarks that measure a server from outside (`tandem bench agent`): it
// sends one request with "stream": true and include_usage, and times what
// comes back, from the request's sending to the first and the last delta. It
// speaks only OpenAI's API, so tandem and llama-server are measured alike.
#pragma once
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::server {

struct StreamedChat {
  int status = 0;     // the HTTP status (0: no response)
  std::string error;  // the error's message or body when status is not 200
  // To the first delta with content or a tool call, or to the finish reason of
  // a response with none (the prompt's prefill all the same).
  double ttft_ms = -1;
  double last_delta_ms = -1;  // to the last such delta
  double total_ms = 0;        // to the end of the stream
  int deltas = 0;             // deltas with content or a tool call
  // From the final usage chunk (-1: not reported). cached_tokens is
  // usage.prompt_tokens_details.cached_tokens.
  int prompt_tokens = -1, cached_tokens = -1, completion_tokens = -1;
  std::string content;        // the message's text, concatenated
  std::string finish_reason;  // the choice's
  int tool_calls = 0;         // tool calls streamed (distinct indices)

  // From the first delta to the last (0 with no delta).
  double decode_ms() const { return deltas > 0 ? last_delta_ms - ttft_ms : 0; }
  // Decode tokens per second: the tokens after the first over the time from
  // the first delta to the last (0 when it cannot be told).
  double decode_tokens_per_s() const;
};

class ChatStreamClient {
 public:
  // base_url: "http://host:port" (a trailing "/v1" or "/" is dropped); api_key:
  // sent as "Authorization: Bearer KEY" when not empty. Throws tandem::Error for
  // a URL it cannot use.
  ChatStreamClient(const std::string& base_url, std::string api_key, double timeout_s = 600);

  // POST /v1/chat/completions with `body` plus "stream": true and
  // "stream_options": {"include_usage": true}.
  StreamedChat chat(nlohmann::json body) const;
  // GET /health answered 200.
  bool healthy() const;
  const std::string& base_url() const { return base_; }

 private:
  std::string base_, api_key_;
  double timeout_s_;
};

}  // namespace tandem::server
