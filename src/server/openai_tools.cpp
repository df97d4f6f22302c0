#include "server/openai_tools.h"

#include <fmt/format.h>

#include <set>

#include "io/json_text.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace tandem::server {
namespace {

using json = nlohmann::ordered_json;

// OpenAI's rule for a function's name: letters, digits, '_' and '-', at most 64.
bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

const json& member(const json& obj, const char* key, const std::string& where, const char* param,
                   bool (json::*is)() const noexcept, const char* what) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    invalid_request(param, fmt::format("{}.{} is missing", where, key),
                    "missing_required_parameter");
  if (!((*it).*is)())
    invalid_request(param,
                    fmt::format("{}.{} must be {}, got {}", where, key, what, type_name(*it)),
                    "invalid_type");
  return *it;
}

ToolDefinition parse_tool(const json& t, size_t i) {
  const std::string where = fmt::format("tools[{}]", i);
  if (!t.is_object())
    invalid_request("tools", fmt::format("{} must be an object", where), "invalid_type");
  const std::string type =
      member(t, "type", where, "tools", &json::is_string, "a string").get<std::string>();
  if (type != "function")
    invalid_request("tools",
                    fmt::format("{}.type must be 'function', got '{}' (tandem serves function "
                                "tools only)",
                                where, type),
                    "unsupported_value");
  const json& f = member(t, "function", where, "tools", &json::is_object, "an object");
  const std::string fwhere = where + ".function";
  ToolDefinition d;
  d.name = member(f, "name", fwhere, "tools", &json::is_string, "a string").get<std::string>();
  if (!valid_function_name(d.name))
    invalid_request(
        "tools",
        fmt::format("{}.name '{}' must be 1-64 letters, digits, '_' or '-'", fwhere, d.name),
        "invalid_value");
  const Fields ff(f);
  if (ff.get("description") && !ff.get("description")->is_string())
    invalid_request("tools", fmt::format("{}.description must be a string", fwhere),
                    "invalid_type");
  if (const json* p = ff.get("parameters")) {
    if (!p->is_object())
      invalid_request(
          "tools",
          fmt::format("{}.parameters must be a JSON Schema object, got {}", fwhere, type_name(*p)),
          "invalid_type");
    d.parameters = *p;
  } else {
    d.parameters = {{"type", "object"}};
  }
  if (ff.get("strict") && !ff.get("strict")->is_boolean())
    invalid_request("tools", fmt::format("{}.strict must be a boolean", fwhere), "invalid_type");
  d.definition = t.dump();
  return d;
}

ToolChoice parse_choice(const json* v, const ToolsRequest& r) {
  ToolChoice c;
  c.kind = r.tools.empty() ? ToolChoice::Kind::None : ToolChoice::Kind::Auto;
  if (!v) return c;
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "none")
      c.kind = ToolChoice::Kind::None;
    else if (s == "auto")
      c.kind = r.tools.empty() ? ToolChoice::Kind::None : ToolChoice::Kind::Auto;
    else if (s == "required")
      c.kind = ToolChoice::Kind::Required;
    else
      invalid_request("tool_choice",
                      fmt::format("'tool_choice' must be 'none', 'auto', 'required' or "
                                  "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}, "
                                  "got '{}'",
                                  s),
                      "invalid_value");
  } else if (v->is_object()) {
    const json& f =
        member(*v, "function", "tool_choice", "tool_choice", &json::is_object, "an object");
    c.kind = ToolChoice::Kind::Function;
    c.function =
        member(f, "name", "tool_choice.function", "tool_choice", &json::is_string, "a string")
            .get<std::string>();
    bool known = false;
    for (const auto& t : r.tools) known |= t.name == c.function;
    if (!known && !r.tools.empty())
      invalid_request(
          "tool_choice",
          fmt::format("tool_choice names the function '{}', which is not in 'tools'", c.function),
          "invalid_value");
  } else {
    invalid_request(
        "tool_choice",
        fmt::format("'tool_choice' must be a string or an object, got {}", type_name(*v)),
        "invalid_type");
  }
  if (c.kind != ToolChoice::Kind::None && r.tools.empty())
    invalid_request("tool_choice", "'tool_choice' requires 'tools'", "invalid_value");
  return c;
}

}  // namespace

ToolsRequest parse_tools(const json& body) {
  const Fields f(body);
  ToolsRequest r;
  if (const json* t = f.get("tools")) {
    if (!t->is_array())
      invalid_request("tools", fmt::format("'tools' must be an array, got {}", type_name(*t)),
                      "invalid_type");
    std::set<std::string> names;
    for (size_t i = 0; i < t->size(); ++i) {
      r.tools.push_back(parse_tool((*t)[i], i));
      if (!names.insert(r.tools.back().name).second)
        invalid_request(
            "tools",
            fmt::format("tools[{}]: the function name '{}' is used twice", i, r.tools.back().name),
            "invalid_value");
    }
  }
  r.choice = parse_choice(f.get("tool_choice"), r);
  r.parallel = f.boolean("parallel_tool_calls").value_or(true);
  for (const char* legacy : {"functions", "function_call"})
    if (f.get(legacy))
      invalid_request(legacy,
                      fmt::format("'{}' (the deprecated function calling) is not supported: "
                                  "send 'tools' and 'tool_choice'",
                                  legacy),
                      "unsupported_value");
  return r;
}

std::vector<ChatToolCall> parse_message_tool_calls(const json& calls, size_t i) {
  const std::string where = fmt::format("messages[{}].tool_calls", i);
  if (!calls.is_array())
    invalid_request("messages", fmt::format("{} must be an array", where), "invalid_type");
  std::vector<ChatToolCall> out;
  for (size_t k = 0; k < calls.size(); ++k) {
    const json& c = calls[k];
    const std::string cwhere = fmt::format("{}[{}]", where, k);
    if (!c.is_object())
      invalid_request("messages", fmt::format("{} must be an object", cwhere), "invalid_type");
    ChatToolCall call;
    if (const json* id = Fields(c).get("id")) {
      if (!id->is_string())
        invalid_request("messages", fmt::format("{}.id must be a string", cwhere), "invalid_type");
      call.id = id->get<std::string>();
    }
    const json& f = member(c, "function", cwhere, "messages", &json::is_object, "an object");
    const std::string fwhere = cwhere + ".function";
    call.name =
        member(f, "name", fwhere, "messages", &json::is_string, "a string").get<std::string>();
    const json& args = member(f, "arguments", fwhere, "messages", &json::is_string, "a string");
    call.arguments = args.get<std::string>();
    std::string error;
    auto parsed = try_parse_json<json>(call.arguments, &error);
    if (!parsed || !parsed->is_object())
      invalid_request("messages",
                      fmt::format("{}.arguments must be a JSON object's text{}", fwhere,
                                  parsed ? "" : ": " + error),
                      "invalid_value");
    out.push_back(std::move(call));
  }
  return out;
}

}  // namespace tandem::server
