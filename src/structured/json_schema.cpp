#include "structured/json_schema.h"

#include <cmath>
#include <map>
#include <set>

#include "structured/json_lexical.h"
#include "structured/regex.h"

namespace tandem::structured {
namespace {

using json = nlohmann::ordered_json;

// Keywords whose constraints the grammar cannot express.
const std::set<std::string, std::less<>> kRefusedKeywords = {
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "prefixItems",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "multipleOf",
    "$dynamicRef",
    "$recursiveRef",
};

const std::map<std::string, std::string, std::less<>> kFormats = {
    {"date", "^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$"},
    {"time", "^([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{1,6})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)$"},
    {"date-time",
     "^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])T([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d"
     "(\\.\\d{1,6})?(Z|[+-]([01]\\d|2[0-3]):[0-5]\\d)$"},
    {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
    {"ipv4",
     "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$"},
};

constexpr int kMaxSchemaDepth = 64;

const char* const kTypes[] = {"null", "boolean", "object", "array", "number", "integer", "string"};

std::string pointer_token(const std::string& key) {  // RFC 6901 escaping
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string show(const std::string& path) { return path.empty() ? "#" : "#" + path; }

[[noreturn]] void schema_error(const std::string& path, const std::string& what) {
  throw SchemaError(path, what);
}

bool is_neutral(std::string_view key, const json& v) {
  if (key == "uniqueItems") return v.is_boolean() && !v.get<bool>();
  if (key == "minProperties" || key == "minContains") return v.is_number() && v.get<double>() == 0;
  return false;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root) {}

  std::shared_ptr<const Grammar> compile(std::string_view prefix = {},
                                         std::string_view suffix = {}) {
    Pattern p = value(root_, "");
    if (!prefix.empty() || !suffix.empty())
      p = Pattern::seq({Pattern::literal(prefix), p, Pattern::literal(suffix)});
    return build(p);
  }

  std::shared_ptr<const Grammar> compile_any_object() {
    return build(Pattern::call(any_object_rule()));
  }

 private:
  std::shared_ptr<const Grammar> build(const Pattern& p) {
    int root_rule;
    if (p.kind() == Pattern::Kind::Call) {
      root_rule = p.rule();
    } else {
      root_rule = b_.declare_rule("#");
      b_.define_rule(root_rule, p);
    }
    try {
      return b_.build(root_rule);
    } catch (const SchemaError&) {
      throw;
    } catch (const Error& e) {
      schema_error("", e.what());
    }
  }

  // Guards against $ref cycles that never pass through an object or array
  // (those would be an infinite pattern).
  struct InlineGuard {
    InlineGuard(std::vector<std::string>& stack, const std::string& path) : stack_(stack) {
      for (const auto& p : stack)
        if (p == path)
          schema_error(path,
                       "a $ref cycle that does not pass through an object or array "
                       "is not supported");
      stack.push_back(path);
    }
    ~InlineGuard() { stack_.pop_back(); }
    std::vector<std::string>& stack_;
  };
  // A call is a fresh start for cycle detection: the rule's body sees an empty
  // stack, and the caller's comes back afterwards (also when an error unwinds).
  struct FreshInlineStack {
    explicit FreshInlineStack(std::vector<std::string>& stack) : stack_(stack) {
      saved_.swap(stack_);
    }
    ~FreshInlineStack() { saved_.swap(stack_); }
    std::vector<std::string>& stack_;
    std::vector<std::string> saved_;
  };

  void check_keywords(const json& s, const std::string& path) {
    for (const auto& [key, v] : s.items())
      if (kRefusedKeywords.count(key) && !is_neutral(key, v))
        schema_error(path + "/" + pointer_token(key), fmt::format("'{}' is not supported", key));
  }

  // The validation keywords of s beside `except` (annotations and unknown keywords aside).
  std::vector<std::string> other_keywords(const json& s,
                                          std::initializer_list<const char*> except) {
    static const std::set<std::string, std::less<>> kValidation = {"type",
                                                                   "enum",
                                                                   "const",
                                                                   "anyOf",
                                                                   "oneOf",
                                                                   "allOf",
                                                                   "$ref",
                                                                   "properties",
                                                                   "required",
                                                                   "additionalProperties",
                                                                   "items",
                                                                   "minItems",
                                                                   "maxItems",
                                                                   "minLength",
                                                                   "maxLength",
                                                                   "pattern",
                                                                   "format",
                                                                   "minimum",
                                                                   "maximum",
                                                                   "exclusiveMinimum",
                                                                   "exclusiveMaximum",
                                                                   "nullable"};
    std::vector<std::string> out;
    for (const auto& [key, v] : s.items()) {
      if (!kValidation.count(key)) continue;
      bool excepted = false;
      for (const char* e : except) excepted |= key == e;
      if (!excepted) out.push_back(key);
    }
    return out;
  }

  Pattern value(const json& s, const std::string& path) {
    // Compiling recurses once per level: a request must not exhaust the stack.
    if (++depth_ > kMaxSchemaDepth)
      schema_error(path, fmt::format("schemas nested deeper than {} levels are not supported",
                                     kMaxSchemaDepth));
    struct Leave {
      int& depth;
      ~Leave() { --depth; }
    } leave{depth_};
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value();
      schema_error(path, "the schema 'false' admits no value");
    }
    if (!s.is_object()) schema_error(path, "a schema must be an object or a boolean");
    check_keywords(s, path);
    InlineGuard guard(inline_stack_, path);

    if (s.contains("$ref")) return reference(s, path);
    if (s.value("nullable", false) == true) {
      json inner = s;
      inner.erase("nullable");
      return Pattern::alt({core(inner, path), Pattern::literal("null")});
    }
    return core(s, path);
  }

  Pattern reference(const json& s, const std::string& path) {
    if (auto others = other_keywords(s, {"$ref"}); !others.empty())
      schema_error(path, fmt::format("'{}' beside '$ref' is not supported", others[0]));
    const json& ref = s["$ref"];
    if (!ref.is_string()) schema_error(path + "/$ref", "'$ref' must be a string");
    const std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#')
      schema_error(path + "/$ref",
                   fmt::format("'$ref' = '{}': only references within the schema ('#...') are "
                               "supported",
                               r));
    const std::string target = r.substr(1);
    const json* node = nullptr;
    try {
      node = &root_.at(json::json_pointer(target));
    } catch (const json::exception&) {
      schema_error(path + "/$ref", fmt::format("'$ref' = '{}' names nothing in the schema", r));
    }
    return value(*node, target);
  }

  Pattern core(const json& s, const std::string& path) {
    if (s.contains("allOf")) {
      const json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1)
        schema_error(path + "/allOf", "'allOf' with other than one schema is not supported");
      if (auto others = other_keywords(s, {"allOf"}); !others.empty())
        schema_error(path, fmt::format("'{}' beside 'allOf' is not supported", others[0]));
      return value(all[0], path + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& alts = s[key];
      if (!alts.is_array() || alts.empty())
        schema_error(path + "/" + key, fmt::format("'{}' must be a non-empty array", key));
      if (auto others = other_keywords(s, {key}); !others.empty())
        schema_error(path, fmt::format("'{}' beside '{}' is not supported", others[0], key));
      if (std::string_view(key) == "oneOf") check_one_of_disjoint(alts, path + "/oneOf");
      std::vector<Pattern> out;
      for (size_t i = 0; i < alts.size(); ++i)
        out.push_back(value(alts[i], fmt::format("{}/{}/{}", path, key, i)));
      return Pattern::alt(std::move(out));
    }
    const std::vector<std::string> types = types_of(s, path);
    if (s.contains("const")) return literal_of(s["const"], path + "/const");
    if (s.contains("enum")) return enumeration(s, types, path);
    if (types.empty()) return any_value();
    std::vector<Pattern> alts;
    for (const auto& t : types) alts.push_back(typed(s, t, path));
    return Pattern::alt(std::move(alts));
  }

  // oneOf is generated as anyOf, which is exact only when no value matches two
  // alternatives. Accepted as disjoint: alternatives whose values have
  // different JSON types, objects that require one property with different
  // const/enum values (a tagged union), and enums or consts with no value in
  // common. Anything else is refused rather than risk an invalid output.
  void check_one_of_disjoint(const json& alts, const std::string& path) {
    for (size_t i = 0; i < alts.size(); ++i)
      for (size_t j = i + 1; j < alts.size(); ++j)
        if (!disjoint(alts[i], alts[j]))
          schema_error(path, fmt::format("'oneOf' alternatives {} and {} may both match a value, "
                                         "which generation cannot rule out (alternatives "
                                         "need different types, or different const/enum "
                                         "values of a required property; or use 'anyOf')",
                                         i, j));
  }

  const json& resolved(const json& s, int depth = 0) {
    if (depth > kMaxSchemaDepth || !s.is_object() || !s.contains("$ref") || !s["$ref"].is_string())
      return s;
    const std::string r = s["$ref"].get<std::string>();
    if (r.empty() || r[0] != '#') return s;
    try {
      return resolved(root_.at(json::json_pointer(r.substr(1))), depth + 1);
    } catch (const json::exception&) {
      return s;
    }
  }

  // The JSON types ("number" including integers) the values of a schema may have.
  std::set<std::string> value_types(const json& schema, int depth = 0) {
    static const std::set<std::string> kAll = {"null",  "boolean", "object",
                                               "array", "number",  "string"};
    const json& s = resolved(schema);
    if (depth > kMaxSchemaDepth) return kAll;
    if (s.is_boolean()) return s.get<bool>() ? kAll : std::set<std::string>{};
    if (!s.is_object()) return kAll;
    auto type_of_value = [](const json& v) -> std::string {
      if (v.is_null()) return "null";
      if (v.is_boolean()) return "boolean";
      if (v.is_object()) return "object";
      if (v.is_array()) return "array";
      if (v.is_number()) return "number";
      return "string";
    };
    std::set<std::string> out;
    if (s.contains("const")) {
      out.insert(type_of_value(s["const"]));
    } else if (s.contains("enum") && s["enum"].is_array()) {
      for (const auto& v : s["enum"]) out.insert(type_of_value(v));
    } else if (s.contains("anyOf") || s.contains("oneOf")) {
      for (const auto& alt : s.contains("anyOf") ? s["anyOf"] : s["oneOf"])
        for (const auto& t : value_types(alt, depth + 1)) out.insert(t);
    } else if (s.contains("allOf") && s["allOf"].is_array() && s["allOf"].size() == 1) {
      out = value_types(s["allOf"][0], depth + 1);
    } else {
      std::vector<std::string> types;
      try {
        types = types_of(s, "");
      } catch (const SchemaError&) {
        return kAll;  // compiling the alternative reports it
      }
      if (types.empty()) return kAll;
      for (const auto& t : types) out.insert(t == "integer" ? "number" : t);
    }
    if (s.value("nullable", false) == true) out.insert("null");
    return out;
  }

  // The values a schema allows when it lists them (const or enum).
  static std::optional<std::vector<json>> listed_values(const json& s) {
    if (!s.is_object()) return std::nullopt;
    if (s.contains("const")) return std::vector<json>{s["const"]};
    if (s.contains("enum") && s["enum"].is_array())
      return std::vector<json>(s["enum"].begin(), s["enum"].end());
    return std::nullopt;
  }

  static bool no_common_value(const std::vector<json>& a, const std::vector<json>& b) {
    for (const auto& x : a)
      for (const auto& y : b)
        if (x == y) return false;
    return true;
  }

  bool disjoint(const json& a_schema, const json& b_schema) {
    const json& a = resolved(a_schema);
    const json& b = resolved(b_schema);
    const std::set<std::string> ta = value_types(a), tb = value_types(b);
    bool overlap = false;
    for (const auto& t : ta) overlap |= tb.count(t) > 0;
    if (!overlap) return true;
    const auto la = listed_values(a), lb = listed_values(b);
    if (la && lb) return no_common_value(*la, *lb);
    // Tagged objects: a property both require, with listed values in common to neither.
    const std::set<std::string> object_only = {"object"};
    if (ta != object_only || tb != object_only || !a.is_object() || !b.is_object()) return false;
    auto required = [](const json& s) {
      std::set<std::string> r;
      if (s.contains("required") && s["required"].is_array())
        for (const auto& v : s["required"])
          if (v.is_string()) r.insert(v.get<std::string>());
      return r;
    };
    const auto ra = required(a), rb = required(b);
    const json empty = json::object();
    const json& pa = a.contains("properties") ? a["properties"] : empty;
    const json& pb = b.contains("properties") ? b["properties"] : empty;
    for (const auto& name : ra) {
      if (!rb.count(name) || !pa.is_object() || !pb.is_object() || !pa.contains(name) ||
          !pb.contains(name))
        continue;
      const auto va = listed_values(resolved(pa[name])), vb = listed_values(resolved(pb[name]));
      if (va && vb && no_common_value(*va, *vb)) return true;
    }
    return false;
  }

  std::vector<std::string> types_of(const json& s, const std::string& path) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      auto add = [&](const json& v) {
        if (!v.is_string()) schema_error(path + "/type", "'type' must be a string or strings");
        const std::string name = v.get<std::string>();
        bool known = false;
        for (const char* k : kTypes) known |= name == k;
        if (!known) schema_error(path + "/type", fmt::format("unknown type '{}'", name));
        if (std::find(types.begin(), types.end(), name) == types.end()) types.push_back(name);
      };
      if (t.is_array()) {
        if (t.empty()) schema_error(path + "/type", "'type' is an empty array");
        for (const auto& v : t) add(v);
      } else {
        add(t);
      }
      return types;
    }
    // No type: generate the type that the keywords present constrain.
    auto has_any = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys)
        if (s.contains(k)) return true;
      return false;
    };
    if (has_any({"properties", "required", "additionalProperties"})) types.push_back("object");
    if (has_any({"items", "minItems", "maxItems"})) types.push_back("array");
    if (has_any({"pattern", "minLength", "maxLength", "format"})) types.push_back("string");
    // Bounds without a type: integers satisfy them and can be generated within them.
    if (has_any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}))
      types.push_back("integer");
    return types;
  }

  Pattern literal_of(const json& v, const std::string& path) {
    try {
      return json_literal(v);
    } catch (const json::exception& e) {
      schema_error(path, fmt::format("a value that cannot be written as JSON ({})", e.what()));
    }
  }

  static bool has_type(const json& v, const std::string& t) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    if (t == "string") return v.is_string();
    if (t == "integer")
      return v.is_number_integer() ||
             (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    return v.is_number();  // number
  }

  Pattern enumeration(const json& s, const std::vector<std::string>& types,
                      const std::string& path) {
    const json& e = s["enum"];
    if (!e.is_array()) schema_error(path + "/enum", "'enum' must be an array");
    std::vector<Pattern> alts;
    for (size_t i = 0; i < e.size(); ++i) {
      bool typed_ok = types.empty();
      for (const auto& t : types) typed_ok |= has_type(e[i], t);
      if (typed_ok) alts.push_back(literal_of(e[i], fmt::format("{}/enum/{}", path, i)));
    }
    if (alts.empty()) schema_error(path + "/enum", "no value of 'enum' has the schema's type");
    return Pattern::alt(std::move(alts));
  }

  Pattern typed(const json& s, const std::string& t, const std::string& path) {
    if (t == "null") return Pattern::literal("null");
    if (t == "boolean") return json_boolean();
    if (t == "string") return string(s, path);
    if (t == "integer") return integer(s, path);
    if (t == "number") return number(s, path);
    if (t == "object") return Pattern::call(object_rule(s, path));
    return Pattern::call(array_rule(s, path));
  }

  std::optional<int> count(const json& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return std::nullopt;
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      schema_error(path + "/" + key, fmt::format("'{}' must be a non-negative integer", key));
    if (v.get<int64_t>() > kMaxCount)
      schema_error(path + "/" + key, fmt::format("'{}' = {} is not supported (at most {})", key,
                                                 v.get<int64_t>(), kMaxCount));
    return static_cast<int>(v.get<int64_t>());
  }

  Pattern string(const json& s, const std::string& path) {
    const auto min_len = count(s, "minLength", path), max_len = count(s, "maxLength", path);
    const bool lengths = min_len || max_len;
    std::optional<std::string> regex;
    std::string regex_path;
    if (s.contains("format")) {
      const json& f = s["format"];
      if (!f.is_string()) schema_error(path + "/format", "'format' must be a string");
      auto it = kFormats.find(f.get<std::string>());
      if (it == kFormats.end())
        schema_error(path + "/format",
                     fmt::format("'format' = '{}' is not supported (supported: date, time, "
                                 "date-time, uuid, ipv4)",
                                 f.get<std::string>()));
      if (s.contains("pattern") || lengths)
        schema_error(path + "/format",
                     "'format' together with 'pattern', 'minLength' or 'maxLength' is not "
                     "supported");
      regex = it->second;
      regex_path = path + "/format";
    }
    if (s.contains("pattern")) {
      const json& p = s["pattern"];
      if (!p.is_string()) schema_error(path + "/pattern", "'pattern' must be a string");
      if (lengths)
        schema_error(path + "/pattern",
                     "'pattern' together with 'minLength' or 'maxLength' is not supported");
      regex = p.get<std::string>();
      regex_path = path + "/pattern";
    }
    if (regex) {
      try {
        return json_quoted(compile_json_string_regex(*regex));
      } catch (const Error& e) {
        schema_error(regex_path, e.what());
      }
    }
    const int lo = min_len.value_or(0), hi = max_len.value_or(-1);
    if (hi >= 0 && hi < lo)
      schema_error(path + "/maxLength",
                   fmt::format("'maxLength' = {} is below 'minLength' = {}", hi, lo));
    return json_string(lo, hi);
  }

  // A numeric bound; exclusive bounds as numbers (draft 6+) or booleans (draft 4).
  std::optional<double> bound(const json& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return std::nullopt;
    const json& v = s[key];
    if (!v.is_number()) schema_error(path + "/" + key, fmt::format("'{}' must be a number", key));
    return v.get<double>();
  }

  Pattern integer(const json& s, const std::string& path) {
    std::optional<double> lo = bound(s, "minimum", path), hi = bound(s, "maximum", path);
    bool lo_exclusive = false, hi_exclusive = false;
    for (auto [key, target, excl] : {std::tuple{"exclusiveMinimum", &lo, &lo_exclusive},
                                     std::tuple{"exclusiveMaximum", &hi, &hi_exclusive}}) {
      if (!s.contains(key)) continue;
      if (s[key].is_boolean()) {
        *excl = s[key].get<bool>();
      } else {
        const double v = *bound(s, key, path);
        const bool is_min = std::string_view(key) == "exclusiveMinimum";
        // The tighter of the two bounds wins.
        if (!*target || (is_min ? v >= **target : v <= **target)) {
          *target = v;
          *excl = true;
        }
      }
    }
    auto clamp = [](double v) { return static_cast<int64_t>(std::clamp(v, -1e17, 1e17)); };
    std::optional<int64_t> ilo, ihi;
    if (lo) ilo = clamp(lo_exclusive ? std::floor(*lo) + 1 : std::ceil(*lo));
    if (hi) ihi = clamp(hi_exclusive ? std::ceil(*hi) - 1 : std::floor(*hi));
    try {
      return json_integer(ilo, ihi);
    } catch (const Error& e) {
      schema_error(path, fmt::format("the bounds admit no integer: {}", e.what()));
    }
  }

  Pattern number(const json& s, const std::string& path) {
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(key))
        schema_error(path + "/" + key,
                     fmt::format("'{}' on a number is not supported (it is on an integer)", key));
    return json_number();
  }

  // The rule for `key` and whether it is new: a new rule is declared before its
  // body is compiled, so that the body may call it (recursion through $ref).
  std::pair<int, bool> rule_for(const std::string& key, const std::string& name) {
    auto [it, fresh] = rules_.emplace(key, -1);
    if (fresh) it->second = b_.declare_rule(name);
    return {it->second, fresh};
  }

  // A rule for each object schema, by its location.
  int object_rule(const json& s, const std::string& path) {
    const auto [rule, fresh_rule] = rule_for(path + "#object", show(path));
    if (!fresh_rule) return rule;
    FreshInlineStack fresh(inline_stack_);

    const Pattern ws = json_whitespace();
    const json empty = json::object();
    const json& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) schema_error(path + "/properties", "'properties' must be an object");
    std::vector<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) schema_error(path + "/required", "'required' must be an array of names");
      for (const auto& v : r) {
        if (!v.is_string())
          schema_error(path + "/required", "'required' must be an array of names");
        required.push_back(v.get<std::string>());
      }
    }
    const json* additional =
        s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (additional && !additional->is_boolean() && !additional->is_object())
      schema_error(path + "/additionalProperties",
                   "'additionalProperties' must be a boolean or a schema");
    const bool closed = additional && additional->is_boolean() && !additional->get<bool>();

    auto member = [&](const std::string& name, const Pattern& v) {
      return Pattern::seq({json_literal(json(name)), ws, Pattern::byte(':'), ws, v, ws});
    };
    Pattern body;
    if (props.empty() && required.empty() && !closed) {
      // A map: any keys, values of the additionalProperties schema (any value without one).
      const Pattern v = additional && additional->is_object()
                            ? value(*additional, path + "/additionalProperties")
                            : any_value();
      const Pattern entry = Pattern::seq({json_string(), ws, Pattern::byte(':'), ws, v, ws});
      body = Pattern::optional(
          Pattern::seq({entry, Pattern::star(Pattern::seq({Pattern::byte(','), ws, entry}))}));
    } else {
      std::vector<Pattern> items;
      std::vector<bool> flags;
      for (const auto& [name, sub] : props.items()) {
        items.push_back(member(name, value(sub, path + "/properties/" + pointer_token(name))));
        flags.push_back(std::find(required.begin(), required.end(), name) != required.end());
      }
      for (const auto& name : required) {
        if (props.contains(name)) continue;
        if (closed)
          schema_error(path + "/required",
                       fmt::format("'{}' is required but not in 'properties', and "
                                   "'additionalProperties' is false",
                                   name));
        items.push_back(member(name, any_value()));
        flags.push_back(true);
      }
      body = Pattern::members(std::move(items), std::move(flags),
                              Pattern::seq({Pattern::byte(','), ws}));
    }
    b_.define_rule(rule, Pattern::seq({Pattern::byte('{'), ws, body, Pattern::byte('}')}));
    return rule;
  }

  int array_rule(const json& s, const std::string& path) {
    const auto [rule, fresh_rule] = rule_for(path + "#array", show(path));
    if (!fresh_rule) return rule;
    FreshInlineStack fresh(inline_stack_);

    const int min = count(s, "minItems", path).value_or(0);
    const auto max = count(s, "maxItems", path);
    if (max && *max < min)
      schema_error(path + "/maxItems",
                   fmt::format("'maxItems' = {} is below 'minItems' = {}", *max, min));
    Pattern item;
    if (s.contains("items")) {
      if (s["items"].is_array())
        schema_error(path + "/items", "'items' as an array of schemas (a tuple) is not supported");
      item = item_call(s["items"], path + "/items");
    } else {
      item = item_call(json(true), "");
    }
    const Pattern ws = json_whitespace();
    Pattern body;
    if (max && *max == 0) {
      body = Pattern();
    } else {
      const Pattern more = Pattern::seq({Pattern::byte(','), ws, item, ws});
      body = Pattern::seq(
          {item, ws, Pattern::repeat(more, std::max(min - 1, 0), max ? *max - 1 : -1)});
      if (min == 0) body = Pattern::optional(body);
    }
    b_.define_rule(rule, Pattern::seq({Pattern::byte('['), ws, body, Pattern::byte(']')}));
    return rule;
  }

  // Array items as a call: counted repetitions of a call keep the automaton small.
  Pattern item_call(const json& s, const std::string& path) {
    Pattern p = path.empty() ? any_value() : value(s, path);
    if (p.kind() == Pattern::Kind::Call) return p;
    const auto [rule, fresh_rule] =
        rule_for(path + "#item", path.empty() ? "any value" : show(path));
    if (fresh_rule) b_.define_rule(rule, p);
    return Pattern::call(rule);
  }

  // A free-form value at nesting level `depth`: objects and arrays at most
  // kMaxFreeDepth levels deep, counted from level 0 (json_schema.h).
  Pattern any_value(int depth = 0) {
    std::vector<Pattern> alts{json_string(), json_number(), json_boolean(),
                              Pattern::literal("null")};
    if (depth < kMaxFreeDepth) {
      alts.push_back(Pattern::call(any_object_rule(depth)));
      alts.push_back(Pattern::call(any_array_rule(depth)));
    }
    return Pattern::alt(std::move(alts));
  }

  // An object (array) of free-form values, itself at nesting level `depth`.
  int any_object_rule(int depth = 0) {
    if (any_object_[depth] >= 0) return any_object_[depth];
    any_object_[depth] = b_.declare_rule("any object");
    const Pattern ws = json_whitespace();
    const Pattern entry =
        Pattern::seq({json_string(), ws, Pattern::byte(':'), ws, any_value(depth + 1), ws});
    const Pattern body = Pattern::optional(
        Pattern::seq({entry, Pattern::star(Pattern::seq({Pattern::byte(','), ws, entry}))}));
    b_.define_rule(any_object_[depth],
                   Pattern::seq({Pattern::byte('{'), ws, body, Pattern::byte('}')}));
    return any_object_[depth];
  }

  int any_array_rule(int depth = 0) {
    if (any_array_[depth] >= 0) return any_array_[depth];
    any_array_[depth] = b_.declare_rule("any array");
    const Pattern ws = json_whitespace();
    const Pattern v = any_value(depth + 1);
    const Pattern body = Pattern::optional(
        Pattern::seq({v, ws, Pattern::star(Pattern::seq({Pattern::byte(','), ws, v, ws}))}));
    b_.define_rule(any_array_[depth],
                   Pattern::seq({Pattern::byte('['), ws, body, Pattern::byte(']')}));
    return any_array_[depth];
  }

  const json& root_;
  GrammarBuilder b_;
  std::map<std::string, int> rules_;
  std::vector<std::string> inline_stack_;
  // The rules of free-form objects and arrays, by nesting level (-1: not yet made).
  std::vector<int> any_object_ = std::vector<int>(kMaxFreeDepth, -1);
  std::vector<int> any_array_ = std::vector<int>(kMaxFreeDepth, -1);
  int depth_ = 0;  // value() calls in progress
};

}  // namespace

SchemaError::SchemaError(std::string p, const std::string& what)
    : Error(fmt::format("schema at '{}': {}", show(p), what)), path(std::move(p)) {}

std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::ordered_json& schema) {
  return SchemaCompiler(schema).compile();
}

std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::ordered_json& schema,
                                                   std::string_view prefix,
                                                   std::string_view suffix) {
  return SchemaCompiler(schema).compile(prefix, suffix);
}

std::shared_ptr<const Grammar> any_json_object_grammar() {
  static const json empty = json::object();
  static const std::shared_ptr<const Grammar> g = SchemaCompiler(empty).compile_any_object();
  return g;
}

}  // namespace tandem::structured
