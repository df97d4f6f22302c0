// OpenAI's tool calling in a chat request: `tools` (function definitions),
// `tool_choice` and `parallel_tool_calls`, and the assistant `tool_calls` and
// `role: tool` messages of the history. Read and checked here, with a 400
// naming the field for anything malformed; what the model's template can
// express is checked once the request is built (request_builder.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace tandem::server {

struct ToolDefinition {
  std::string name;
  std::string definition;  // the tool object as sent (JSON text), for the template
  // function.parameters (a JSON Schema); an object schema with any members when absent.
  nlohmann::ordered_json parameters;
};

struct ToolChoice {
  enum class Kind { None, Auto, Required, Function };
  Kind kind = Kind::None;
  std::string function;  // Kind::Function: the function's name
};

struct ToolsRequest {
  std::vector<ToolDefinition> tools;
  ToolChoice choice;     // default: auto with tools, none without
  bool parallel = true;  // parallel_tool_calls
  bool calls_possible() const { return !tools.empty() && choice.kind != ToolChoice::Kind::None; }
};

// `tools`, `tool_choice` and `parallel_tool_calls` of a chat request body.
ToolsRequest parse_tools(const nlohmann::ordered_json& body);
// messages[i].tool_calls (an assistant message's).
std::vector<ChatToolCall> parse_message_tool_calls(const nlohmann::ordered_json& calls, size_t i);

}  // namespace tandem::server
