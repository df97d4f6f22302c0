#include "structured/tool_call_grammar.h"

#include "structured/json_schema.h"

namespace tandem::structured {
namespace {

using json = nlohmann::ordered_json;

// The parameters schema moves under `base` in the combined schema: its local
// references ("#", "#/$defs/...") are rewritten to point where it now is.
void rebase_refs(json& s, const std::string& base) {
  if (s.is_object()) {
    for (auto& [key, value] : s.items()) {
      if (key == "$ref" && value.is_string()) {
        const std::string ref = value.get<std::string>();
        if (ref == "#")
          value = "#" + base;
        else if (ref.rfind("#/", 0) == 0)
          value = "#" + base + ref.substr(1);
      } else {
        rebase_refs(value, base);
      }
    }
  } else if (s.is_array()) {
    for (auto& item : s) rebase_refs(item, base);
  }
}

}  // namespace

std::shared_ptr<const Grammar> tool_call_grammar(const std::vector<ToolFunction>& functions,
                                                 std::string_view arguments_key,
                                                 std::string_view prefix, std::string_view suffix,
                                                 size_t* error_function) {
  const bool one = functions.size() == 1;
  json schema;
  std::vector<std::string> bases;
  for (size_t i = 0; i < functions.size(); ++i) {
    const std::string base = (one ? std::string() : "/anyOf/" + std::to_string(i)) +
                             "/properties/" + json_pointer_token(arguments_key);
    bases.push_back(base);
    json params = functions[i].parameters;
    rebase_refs(params, base);
    json call = {{"type", "object"},
                 {"properties",
                  {{"name", {{"const", functions[i].name}}}, {std::string(arguments_key), params}}},
                 {"required", {"name", std::string(arguments_key)}},
                 {"additionalProperties", false}};
    if (one)
      schema = std::move(call);
    else
      schema["anyOf"].push_back(std::move(call));
  }
  try {
    return compile_json_schema(schema, prefix, suffix);
  } catch (const SchemaError& e) {
    // Report the place within the function's own parameters.
    for (size_t i = 0; i < bases.size(); ++i)
      if (e.path.rfind(bases[i], 0) == 0) {
        if (error_function) *error_function = i;
        const std::string what = e.what();  // "schema at '#<path>': <reason>"
        const size_t reason = what.find("': ");
        throw SchemaError(e.path.substr(bases[i].size()),
                          reason == std::string::npos ? what : what.substr(reason + 3));
      }
    throw;
  }
}

}  // namespace tandem::structured
