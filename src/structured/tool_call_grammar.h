// The grammar of one tool call: the JSON object {"name": NAME, KEY: ARGS} for
// one of the offered functions, its arguments a document of that function's
// parameters schema, with the format's fixed text around it (Hermes: "\n"
// before and after, between the call markers). Built as one JSON Schema, an
// anyOf over the functions whose name is a const, and compiled as any schema
// is (json_schema.h), so tool calls get every schema feature and limit that
// response_format has.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "structured/grammar.h"

namespace tandem::structured {

struct ToolFunction {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema
};

// Throws SchemaError for parameters the schema compiler refuses; its path is
// then relative to that function's parameters (error_function tells which).
std::shared_ptr<const Grammar> tool_call_grammar(const std::vector<ToolFunction>& functions,
                                                 std::string_view arguments_key,
                                                 std::string_view prefix, std::string_view suffix,
                                                 size_t* error_function = nullptr);

}  // namespace tandem::structured
