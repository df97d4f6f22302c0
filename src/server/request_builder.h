// From a parsed API request to an engine Request: the prompt as token ids (a
// completion's text is encoded with the tokenizer's BOS setting; chat messages
// are rendered with the model's chat template), the endpoint's defaults, and
// the request checked once (engine/request_check.h) against the model and the
// server's limits, so that the client gets a 400 naming the field rather than a
// failure later.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "engine/request.h"
#include "server/openai_request.h"
#include "structured/token_vocabulary.h"
#include "structured/tool_call_constraint.h"

namespace tandem {
class Model;
}

namespace tandem::server {

struct ServingLimits {
  int n_ctx = 0;              // positions one request may use (prompt + generated)
  int64_t kv_positions = 0;   // positions of the whole KV cache
  int max_prompt_tokens = 0;  // a prompt of more tokens gets a 400; 0: what fits the context
};

// What a request that leaves a choice open gets.
struct RequestDefaults {
  SamplingMode sampling_mode = SamplingMode::Reproducible;
};

class RequestBuilder {
 public:
  RequestBuilder(const Model& model, ServingLimits limits, RequestDefaults defaults = {});

  // Throws ApiError (400) for a request that cannot run: what check_request
  // refuses (named by its field), a chat request when the model's chat
  // template is not one tandem knows, structured output without a tokenizer.
  // tenant: whose text the request may be drafted from (the server's
  // AccessControl::tenant of its Authorization header; 0 without keys).
  Request build(const ParsedRequest& p, uint64_t tenant = 0) const;
  std::vector<int> prompt_tokens(const ParsedRequest& p) const;

  // Why chat requests are refused ("" when the chat template is usable).
  const std::string& chat_unavailable_reason() const { return chat_error_; }
  std::string chat_family() const;
  const ServingLimits& limits() const { return limits_; }
  // How the model writes tool calls (nullopt: its template cannot render tools).
  const std::optional<ToolCallFormat>& tool_format() const { return tool_format_; }

 private:
  const Model& model_;
  ServingLimits limits_;
  RequestDefaults defaults_;
  std::optional<ChatTemplateFamily> family_;
  std::string chat_error_;
  // The model's vocabulary as constrained decoding sees it (null: no tokenizer).
  std::shared_ptr<const structured::TokenVocabulary> vocab_;
  std::optional<ToolCallFormat> tool_format_;
  std::shared_ptr<const structured::ToolCallTokens> tool_tokens_;
  // The constraint of a request that may call tools (tool_choice other than none).
  std::shared_ptr<const TokenConstraint> tool_constraint(const ToolsRequest& t) const;
};

}  // namespace tandem::server
