#include "io/json_text.h"

#include "core/error.h"

namespace tandem {
namespace {

// The deepest nesting of arrays and objects in `text`, counting brackets
// outside string literals; stops counting once past `limit`.
int nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        deepest = std::max(deepest, ++depth);
        if (deepest > limit) return deepest;
        break;
      case ']':
      case '}':
        --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

}  // namespace

template <class Json>
std::optional<Json> try_parse_json(std::string_view text, std::string* error) {
  if (nesting_depth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    *error = fmt::format("arrays and objects nested more than {} levels deep", kMaxJsonDepth);
    return std::nullopt;
  }
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // e.what() starts with "[json.exception.parse_error.101] "; keep the readable part.
    std::string what = e.what();
    if (auto p = what.find("] "); p != std::string::npos) what = what.substr(p + 2);
    *error = what;
    return std::nullopt;
  }
}

template std::optional<nlohmann::json> try_parse_json(std::string_view, std::string*);
template std::optional<nlohmann::ordered_json> try_parse_json(std::string_view, std::string*);

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  std::string error;
  auto j = try_parse_json(text, &error);
  if (!j) fail("{}: invalid JSON: {}", source, error);
  return std::move(*j);
}

std::string json_excerpt(const nlohmann::json& v, size_t max_chars) {
  // Values reaching here come from try_parse_json, so dump() recursion is bounded.
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

}  // namespace tandem
