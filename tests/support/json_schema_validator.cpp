#include "support/json_schema_validator.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <regex>
#include <stdexcept>

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

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// "YYYY-MM-DD" naming a day of the calendar (year 1 to 9999).
bool calendar_date(const std::string& s) {
  if (!std::regex_match(s, std::regex(R"(\d{4}-\d{2}-\d{2})"))) return false;
  const int y = std::stoi(s.substr(0, 4)), m = std::stoi(s.substr(5, 2)),
            d = std::stoi(s.substr(8, 2));
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1 || m < 1 || m > 12 || d < 1) return false;
  return d <= kDays[m - 1] + (m == 2 && leap(y) ? 1 : 0);
}

bool time_of_day(const std::string& s) {
  return std::regex_match(
      s,
      std::regex(R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d))"));
}

// DNS names: labels of 1 to 63 letters, digits and inner hyphens, 253 bytes at most.
bool hostname(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string label = s.substr(start, dot == std::string::npos ? dot : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    for (char c : label)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// Eight groups of 1 to 4 hex digits, or fewer around one "::".
bool ipv6(const std::string& s) {
  const size_t dc = s.find("::");
  if (dc != std::string::npos && s.find("::", dc + 1) != std::string::npos) return false;
  auto groups = [](const std::string& part, int& n) {
    if (part.empty()) return true;
    size_t start = 0;
    while (true) {
      const size_t colon = part.find(':', start);
      const std::string g = part.substr(start, colon == std::string::npos ? colon : colon - start);
      if (g.empty() || g.size() > 4) return false;
      for (char c : g)
        if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
      ++n;
      if (colon == std::string::npos) return true;
      start = colon + 1;
    }
  };
  int n = 0;
  if (dc == std::string::npos) return groups(s, n) && n == 8;
  return groups(s.substr(0, dc), n) && groups(s.substr(dc + 2), n) && n <= 7;
}

// RFC 3986 characters of a path, query or fragment (percent escapes complete).
bool uri_chars(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
        return false;
      i += 2;
    } else if (!std::isalnum(static_cast<unsigned char>(c)) &&
               std::string("-._~!$&'()*+,;=:@/?#[]").find(c) == std::string::npos) {
      return false;
    }
  }
  return true;
}

bool uri(const std::string& s) {  // scheme ":" then RFC 3986 characters
  const size_t colon = s.find(':');
  if (colon == std::string::npos || colon == 0 || !std::isalpha(static_cast<unsigned char>(s[0])))
    return false;
  for (size_t i = 0; i < colon; ++i)
    if (!std::isalnum(static_cast<unsigned char>(s[i])) &&
        std::string("+-.").find(s[i]) == std::string::npos)
      return false;
  return uri_chars(s.substr(colon + 1));
}

bool format_ok(const std::string& format, const std::string& s) {
  if (format == "date") return calendar_date(s);
  if (format == "time") return time_of_day(s);
  if (format == "date-time") {
    const size_t t = s.find_first_of("Tt");
    return t == 10 && calendar_date(s.substr(0, 10)) && time_of_day(s.substr(11));
  }
  if (format == "uuid")
    return std::regex_match(s, std::regex("[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"));
  if (format == "ipv4")
    return std::regex_match(
        s,
        std::regex(R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"));
  if (format == "ipv6") return ipv6(s);
  if (format == "hostname") return hostname(s);
  if (format == "email") {
    const size_t at = s.rfind('@');
    return at != std::string::npos && at > 0 && s.find(' ') == std::string::npos &&
           hostname(s.substr(at + 1)) && s.substr(at + 1).find('.') != std::string::npos;
  }
  if (format == "uri") return uri(s);
  if (format == "uri-reference") return uri(s) || uri_chars(s);  // or a relative reference
  if (format == "regex") {
    try {
      std::regex re(s, std::regex::ECMAScript);
      return true;
    } catch (const std::regex_error&) {
      return false;
    }
  }
  return true;  // other formats are annotations
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::string check(const json& v, const json& s, const std::string& at) {
    if (s.is_boolean()) return s.get<bool>() ? "" : at + ": the schema is false";
    // Draft 7: keywords beside $ref are ignored (tandem's generator applies
    // them too, 2019-09's reading, which gives a subset of these documents).
    if (s.contains("$ref")) return check(v, resolve(s["$ref"].get<std::string>()), at);
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
    if (s.contains("multipleOf") && v.is_number()) {
      const double m = s["multipleOf"].get<double>(), q = v.get<double>() / m;
      if (std::fabs(q - std::round(q)) > 1e-9 * std::max(1.0, std::fabs(q)))
        return fmt::format("{}: {} is not a multiple of {}", at, v.dump(), m);
    }
    if (v.is_object()) return object(v, s, at);
    if (v.is_array()) return array(v, s, at);
    if (v.is_string()) return string(v.get<std::string>(), s, at);
    if (v.is_number()) return number(v.get<double>(), s, at);
    return "";
  }

 private:
  std::string object(const json& v, const json& s, const std::string& at) {
    const json props = s.value("properties", json::object());
    const json patterns = s.value("patternProperties", json::object());
    for (const auto& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>()))
        return fmt::format("{}: required property {} is missing", at, r.dump());
    if (s.contains("minProperties") && v.size() < s["minProperties"].get<size_t>())
      return fmt::format("{}: {} properties, fewer than minProperties", at, v.size());
    if (s.contains("maxProperties") && v.size() > s["maxProperties"].get<size_t>())
      return fmt::format("{}: {} properties, more than maxProperties", at, v.size());
    for (const char* key : {"dependencies", "dependentRequired", "dependentSchemas"}) {
      if (!s.contains(key)) continue;
      for (const auto& [name, dep] : s[key].items()) {
        if (!v.contains(name)) continue;
        if (dep.is_array()) {
          for (const auto& d : dep)
            if (!v.contains(d.get<std::string>()))
              return fmt::format("{}: {} is present but {} is not", at, name, d.dump());
        } else if (auto e = check(v, dep, at); !e.empty()) {
          return fmt::format("{} (a dependency of {})", e, name);
        }
      }
    }
    for (const auto& [k, x] : v.items()) {
      const std::string where = at + "/" + k;
      bool matched = false;
      for (const auto& [re, sub] : patterns.items()) {
        if (!std::regex_search(k, std::regex(re, std::regex::ECMAScript))) continue;
        matched = true;
        if (auto e = check(x, sub, where); !e.empty())
          return fmt::format("{} (patternProperties {})", e, re);
      }
      if (props.contains(k)) {
        if (auto e = check(x, props[k], where); !e.empty()) return e;
      } else if (!matched && s.contains("additionalProperties")) {
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
    if (s.value("uniqueItems", false))
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = i + 1; j < v.size(); ++j)
          if (v[i] == v[j]) return fmt::format("{}: items {} and {} are equal", at, i, j);
    // A tuple (items as an array, or prefixItems), then the rest.
    const json* tuple = s.contains("prefixItems")                      ? &s["prefixItems"]
                        : s.contains("items") && s["items"].is_array() ? &s["items"]
                                                                       : nullptr;
    const char* rest = s.contains("prefixItems") ? "items" : tuple ? "additionalItems" : "items";
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string where = fmt::format("{}/{}", at, i);
      if (tuple && i < tuple->size()) {
        if (auto e = check(v[i], (*tuple)[i], where); !e.empty()) return e;
      } else if (s.contains(rest)) {
        if (auto e = check(v[i], s[rest], where); !e.empty()) return e;
      }
    }
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
    // Draft 4: exclusiveMinimum/exclusiveMaximum as booleans on minimum/maximum.
    const bool lo_excl = s.value("exclusiveMinimum", json(false)) == true;
    const bool hi_excl = s.value("exclusiveMaximum", json(false)) == true;
    if (s.contains("minimum") &&
        (lo_excl ? x <= s["minimum"].get<double>() : x < s["minimum"].get<double>()))
      return bad("at least minimum");
    if (s.contains("maximum") &&
        (hi_excl ? x >= s["maximum"].get<double>() : x > s["maximum"].get<double>()))
      return bad("at most maximum");
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() &&
        x <= s["exclusiveMinimum"].get<double>())
      return bad("above exclusiveMinimum");
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() &&
        x >= s["exclusiveMaximum"].get<double>())
      return bad("below exclusiveMaximum");
    return "";
  }

  // A $ref within the document: a pointer (percent-decoded), a plain name
  // ($anchor, or an id "#name"), or an $id / id (resolved against the root's).
  const json& resolve(const std::string& ref) {
    const size_t hash = ref.find('#');
    std::string doc = ref.substr(0, hash),
                frag = hash == std::string::npos ? "" : ref.substr(hash + 1);
    std::string decoded;
    for (size_t i = 0; i < frag.size(); ++i) {
      if (frag[i] == '%' && i + 2 < frag.size()) {
        decoded += static_cast<char>(std::stoi(frag.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        decoded += frag[i];
      }
    }
    const json* base = &root_;
    if (!doc.empty()) base = find_id(root_, doc, 0);
    if (!base) throw std::runtime_error("validator: no $id " + doc);
    if (!decoded.empty() && decoded[0] != '/') {
      const json* named = find_id(root_, "#" + decoded, 0);
      if (!named) throw std::runtime_error("validator: no anchor " + decoded);
      return *named;
    }
    return base->at(json::json_pointer(decoded));
  }

  // The subschema whose $id, id or $anchor is `id` (an $id matches by its last
  // path segment too: "person.json" names "http://x/person.json").
  static const json* find_id(const json& node, const std::string& id, int depth) {
    if (depth > 100) return nullptr;
    if (node.is_object()) {
      for (const char* key : {"$id", "id", "$anchor"}) {
        if (!node.contains(key) || !node[key].is_string()) continue;
        std::string own = node[key].get<std::string>();
        if (std::string_view(key) == "$anchor") own = "#" + own;
        auto last = [](const std::string& u) { return u.substr(u.rfind('/') + 1); };
        if (own == id || (id[0] != '#' && last(own) == last(id))) return &node;
      }
      for (const auto& [k, v] : node.items())
        if (const json* f = find_id(v, id, depth + 1)) return f;
    } else if (node.is_array()) {
      for (const auto& v : node)
        if (const json* f = find_id(v, id, depth + 1)) return f;
    }
    return nullptr;
  }

  const json& root_;
};

}  // namespace

std::string schema_violation(const json& instance, const json& schema, const json& root) {
  return Validator(root).check(instance, schema, "#");
}

}  // namespace tandem::test
