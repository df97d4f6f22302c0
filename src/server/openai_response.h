// Response bodies in OpenAI's shapes: a whole completion, and the chunks of a
// streamed one. Every body also carries tandem's per-request speculative
// decoding figures under the extension field "tandem".
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/request.h"
#include "server/openai_request.h"
#include "server/request_channel.h"
#include "server/tool_call_output.h"

namespace tandem {
class Tokenizer;
}

namespace tandem::server {

// What every response and chunk of one request repeats.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;                 // the request asked for log-probabilities
  const Tokenizer* tokenizer = nullptr;  // to spell the tokens they are reported for
  // How its tokens were chosen: the seed (sent or drawn; sending it back replays
  // the request) and "greedy", "reproducible" or "optimal".
  uint64_t seed = 0;
  std::string sampling_mode;
  // The request offered tools the model may call: the output is read for calls
  // in this format (tool_call_output.h).
  std::optional<ToolCallFormat> tool_format;
};

ResponseMeta make_meta(Endpoint endpoint, const std::string& model);

// Log-probabilities of emitted tokens (each entry's `chosen` names its token)
// in the endpoint's shape: chat's {"content": [{"token", "logprob", "bytes",
// "top_logprobs"}]}, or completions' {"tokens", "token_logprobs",
// "top_logprobs", "text_offset"}, whose offsets continue from *text_offset.
nlohmann::json logprobs_json(const ResponseMeta& meta,
                             const std::vector<const TokenLogprobs*>& logprobs,
                             size_t* text_offset);

// {"prompt_tokens", "completion_tokens", "total_tokens"}
nlohmann::json usage_json(const RequestResult& r);
// {"acceptance_rate", "drafted", "accepted", "tokens_per_round", ..., "decode_tok_per_s",
//  "seed", "sampling_mode"}
nlohmann::json tandem_stats_json(const ResponseMeta& meta, const RequestStats& s);

// The non-streamed response for a request that finished with "stop" or "length".
nlohmann::json completion_json(const ResponseMeta& meta, const RequestResult& r);

// Streamed chunks. Chat streams open with a chunk whose delta carries the role.
nlohmann::json role_chunk(const ResponseMeta& meta, bool include_usage);
// The text (and log-probabilities) of `news`, and the extension
// "tandem": {"tokens": [{"text", "draft"}], "drafted", "accepted"}: each output's
// text and whether it was an accepted draft, and the request's counts so far.
// With tools, `calls` reads the text: the delta carries its content and tool
// calls instead of the text as it is.
nlohmann::json text_chunk(const ResponseMeta& meta, const RequestChannel::News& news,
                          bool include_usage, size_t* text_offset, ToolCallStream* calls = nullptr);
// A chat chunk with content only: text a tool-call stream held back to the end.
nlohmann::json content_chunk(const ResponseMeta& meta, const std::string& text, bool include_usage);
// The last chunk with a choice: its finish_reason ("tool_calls" when it ended
// after calls) and the "tandem" figures.
nlohmann::json finish_chunk(const ResponseMeta& meta, const RequestResult& r, bool include_usage,
                            bool called_tools = false);
// stream_options.include_usage: a final chunk with no choices and the usage.
nlohmann::json usage_chunk(const ResponseMeta& meta, const RequestResult& r);

// JSON text for the wire; invalid UTF-8 (never expected) becomes U+FFFD rather than an exception.
std::string dump(const nlohmann::json& j);

}  // namespace tandem::server
