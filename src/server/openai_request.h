// The body of POST /v1/completions and /v1/chat/completions, read field by
// field: wrong types and options tandem does not support are refused with a 400
// naming the field (ApiError), never ignored silently. Values are taken as sent:
// their ranges are checked once the request is built (request_builder.h, with
// engine/request_check.h). Fields tandem does not know are ignored, as
// OpenAI-compatible servers do.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/sampler.h"
#include "server/openai_tools.h"
#include "structured/grammar.h"
#include "tokenizer/chat_template.h"

namespace tandem::server {

enum class Endpoint { Completions, ChatCompletions };

// Sampling defaults when a request leaves a field out. Temperature is 1.0 as in
// OpenAI's API: clients written for it omit the field and expect sampling.
constexpr float kDefaultTemperature = 1.0f;
// /v1/completions without max_tokens generates at most this many (OpenAI's default);
// chat without it may use the rest of the context, as OpenAI's chat API does.
constexpr int kDefaultCompletionMaxTokens = 16;
// The most alternatives per position: chat's top_logprobs and completions' logprobs.
constexpr int kMaxChatTopLogprobs = 20;
constexpr int kMaxCompletionLogprobs = 5;

// response_format: free text, any JSON object, or JSON that a schema describes.
struct ResponseFormat {
  enum class Kind { Text, JsonObject, JsonSchema };
  Kind kind = Kind::Text;
  std::string name;     // json_schema.name
  bool strict = false;  // json_schema.strict (the schema is enforced either way)
  // The compiled constraint (JsonObject and JsonSchema): compiled while the
  // request is parsed, so that an unsupported schema is a 400 naming the field.
  std::shared_ptr<const structured::Grammar> grammar;
};

// logprobs: the log-probability of each emitted token, and of the `top` most
// likely tokens at each position (chat: logprobs + top_logprobs; completions:
// logprobs = top).
struct LogprobsRequest {
  bool enabled = false;
  int top = 0;
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                          // "" when the client sent none
  std::optional<std::string> prompt;          // completions: prompt text
  std::vector<int> prompt_ids;                // completions: the prompt as token ids instead
  std::vector<ChatMessage> messages;          // chat
  std::optional<int> max_tokens;              // unset: the endpoint's default
  SamplingParams sampling;                    // seed unused: see `seed`
  std::optional<uint64_t> seed;               // unset: a random one per request
  std::optional<SamplingMode> sampling_mode;  // extension; unset: the server's default
  std::vector<std::string> stop;
  bool ignore_eos = false;  // extension (as in vLLM): generate past end-of-generation tokens
  bool speculate = true;    // extension: false opts this request out of speculative decoding
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  ResponseFormat response_format;
  LogprobsRequest logprobs;
  ToolsRequest tools;  // chat: tools, tool_choice, parallel_tool_calls
};

// Throws ApiError (400) for invalid JSON, a field of the wrong type or range, or
// an unsupported option such as n > 1 or a JSON schema feature tandem cannot
// generate for.
ParsedRequest parse_request(std::string_view body, Endpoint endpoint);

}  // namespace tandem::server
