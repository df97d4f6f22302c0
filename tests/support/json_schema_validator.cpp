#include "support/json_schema_validator.h"

#include <fmt/format.h>

#include <cmath>
#include <regex>

namespace tandem::test {
namespace {

using json = nlohmann::json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_integer(const json& v) {
  return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                   std::floor(v.get<double>()) == v.get<double>());
}

bool has_type(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "integer") return is_integer(v);
  if (t == "number") return v.is_number();
  return false;
}

bool format_ok(const std::string& format, const std::string& s) {
  static const std::string date = R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))";
  static const std::string time =
      R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d))";
  std::string re;
  if (format == "date")
    re = date;
  else if (format == "time")
    re = time;
  else if (format == "date-time")
    re = date + "[Tt]" + time;
  else if (format == "uuid")
    re = "[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}";
  else if (format == "ipv4")
    re = R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
  else
    return true;  // unknown formats are annotations
  return std::regex_match(s, std::regex(re));
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::string check(const json& v, const json& s, const std::string& at) {
    if (s.is_boolean()) return s.get<bool>() ? "" : at + ": the schema is false";
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"].get<std::string>();
      return check(v, root_.at(json::json_pointer(ref.substr(1))), at);
    }
    if (s.value("nullable", false) && v.is_null()) return "";
    if (s.contains("type")) {
      const json& t = s["type"];
      bool ok = false;
      if (t.is_string())
        ok = has_type(v, t.get<std::string>());
      else
        for (const auto& x : t) ok |= has_type(v, x.get<std::string>());
      if (!ok) return fmt::format("{}: {} does not have type {}", at, v.dump(), t.dump());
    }
    if (s.contains("enum")) {
      bool found = false;
      for (const auto& e : s["enum"]) found |= e == v;
      if (!found) return fmt::format("{}: {} is not in the enum", at, v.dump());
    }
    if (s.contains("const") && s["const"] != v)
      return fmt::format("{}: {} is not the const {}", at, v.dump(), s["const"].dump());
    if (s.contains("anyOf")) {
      bool any = false;
      for (const auto& sub : s["anyOf"]) any |= check(v, sub, at).empty();
      if (!any) return fmt::format("{}: {} matches no schema of anyOf", at, v.dump());
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const auto& sub : s["oneOf"]) n += check(v, sub, at).empty();
      if (n != 1) return fmt::format("{}: {} matches {} schemas of oneOf", at, v.dump(), n);
    }
    if (s.contains("allOf"))
      for (const auto& sub : s["allOf"])
        if (auto e = check(v, sub, at); !e.empty()) return e;
    if (v.is_object()) return object(v, s, at);
    if (v.is_array()) return array(v, s, at);
    if (v.is_string()) return string(v.get<std::string>(), s, at);
    if (v.is_number()) return number(v.get<double>(), s, at);
    return "";
  }

 private:
  std::string object(const json& v, const json& s, const std::string& at) {
    const json props = s.value("properties", json::object());
    for (const auto& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>()))
        return fmt::format("{}: required property {} is missing", at, r.dump());
    for (const auto& [k, x] : v.items()) {
      const std::string where = at + "/" + k;
      if (props.contains(k)) {
        if (auto e = check(x, props[k], where); !e.empty()) return e;
      } else if (s.contains("additionalProperties")) {
        if (auto e = check(x, s["additionalProperties"], where); !e.empty())
          return fmt::format("{} (an additional property)", e);
      }
    }
    return "";
  }

  std::string array(const json& v, const json& s, const std::string& at) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>())
      return fmt::format("{}: {} items, fewer than minItems", at, v.size());
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>())
      return fmt::format("{}: {} items, more than maxItems", at, v.size());
    if (s.contains("items"))
      for (size_t i = 0; i < v.size(); ++i)
        if (auto e = check(v[i], s["items"], fmt::format("{}/{}", at, i)); !e.empty()) return e;
    return "";
  }

  std::string string(const std::string& v, const json& s, const std::string& at) {
    const size_t n = code_points(v);
    if (s.contains("minLength") && n < s["minLength"].get<size_t>())
      return fmt::format("{}: '{}' is shorter than minLength", at, v);
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>())
      return fmt::format("{}: '{}' is longer than maxLength", at, v);
    if (s.contains("pattern") &&
        !std::regex_search(v, std::regex(s["pattern"].get<std::string>(), std::regex::ECMAScript)))
      return fmt::format("{}: '{}' does not match the pattern {}", at, v, s["pattern"].dump());
    if (s.contains("format") && !format_ok(s["format"].get<std::string>(), v))
      return fmt::format("{}: '{}' is not a {}", at, v, s["format"].dump());
    return "";
  }

  std::string number(double x, const json& s, const std::string& at) {
    auto bad = [&](const char* what) { return fmt::format("{}: {} is not {}", at, x, what); };
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return bad("at least minimum");
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return bad("at most maximum");
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() &&
        x <= s["exclusiveMinimum"].get<double>())
      return bad("above exclusiveMinimum");
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() &&
        x >= s["exclusiveMaximum"].get<double>())
      return bad("below exclusiveMaximum");
    return "";
  }

  const json& root_;
};

}  // namespace

std::string schema_violation(const json& instance, const json& schema, const json& root) {
  return Validator(root).check(instance, schema, "#");
}

}  // namespace tandem::test
