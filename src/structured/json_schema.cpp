#include "structured/json_schema.h"

#include <cmath>
#include <map>
#include <set>

#include "structured/json_formats.h"
#include "structured/json_lexical.h"
#include "structured/json_number_range.h"
#include "structured/regex.h"
#include "structured/regex_strings.h"
#include "structured/schema_merge.h"
#include "structured/schema_refs.h"
#include "structured/string_length.h"

namespace tandem::structured {
namespace {

using json = nlohmann::ordered_json;

// Keywords whose constraints the grammar cannot express.
const std::set<std::string, std::less<>> kRefusedKeywords = {
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
};

// The most copies of an object's members that counting them may take
// (minProperties/maxProperties: members times the counts tracked).
constexpr size_t kMaxMembersCounted = 4096;  // members x counts tracked for min/maxProperties

constexpr int kMaxSchemaDepth = 64;

const char* const kTypes[] = {"null", "boolean", "object", "array", "number", "integer", "string"};

std::string show(const std::string& path) { return path.empty() ? "#" : "#" + path; }

[[noreturn]] void schema_error(const std::string& path, const std::string& what) {
  throw SchemaError(path, what);
}

bool is_neutral(std::string_view key, const json& v) {
  if (key == "minContains") return v.is_number() && v.get<double>() == 0;
  return false;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root)
      : root_(root),
        refs_(root),
        merger_(refs_, [this](const json& a, const json& b) { return disjoint(a, b); }),
        strings_(b_) {}

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
        schema_error(path + "/" + json_pointer_token(key),
                     fmt::format("'{}' is not supported", key));
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
                                                                   "nullable",
                                                                   "patternProperties",
                                                                   "minProperties",
                                                                   "maxProperties",
                                                                   "dependencies",
                                                                   "dependentRequired",
                                                                   "dependentSchemas",
                                                                   "uniqueItems",
                                                                   "prefixItems",
                                                                   "additionalItems",
                                                                   "multipleOf"};
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

    // allOf, and keywords beside $ref, anyOf or oneOf: one merged schema.
    if (needs_merge(s)) return merged(s, path);
    if (s.contains("$ref")) return reference(s, path);
    if (s.value("nullable", false) == true) {
      json inner = s;
      inner.erase("nullable");
      return Pattern::alt({core(inner, path), Pattern::literal("null")});
    }
    return core(s, path);
  }

  // s merged into one schema (schema_merge.h), compiled at a path of its own
  // so that its rules do not mix with those of the schema as written. Equal
  // merged schemas share the path of the first (so its rules), which ends
  // recursion through them as rule calls end recursion through $ref.
  Pattern merged(const json& s, const std::string& path) {
    json m = merger_.merge(s, path);
    auto [it, fresh] = merged_paths_.emplace(m.dump(), path + "/allOf");
    return value(m, it->second);
  }

  Pattern reference(const json& s, const std::string& path) {
    const json& ref = s["$ref"];
    if (!ref.is_string()) schema_error(path + "/$ref", "'$ref' must be a string");
    const SchemaRefs::Target t = refs_.resolve(ref.get<std::string>(), path);
    return value(*t.node, t.pointer);
  }

  Pattern core(const json& s, const std::string& path) {
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& alts = s[key];
      if (!alts.is_array() || alts.empty())
        schema_error(path + "/" + key, fmt::format("'{}' must be a non-empty array", key));
      if (auto others = other_keywords(s, {key}); !others.empty())
        schema_error(path, fmt::format("'{}' beside '{}' is not supported", others[0], key));
      // Alternatives that may overlap: the merger tells objects apart by
      // their required names where it can.
      if (std::string_view(key) == "oneOf") {
        try {
          check_one_of_disjoint(alts, path + "/oneOf");
        } catch (const SchemaError&) {
          return merged(s, path);
        }
      }
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
    const json* target = refs_.find(s["$ref"].get<std::string>());
    return target ? resolved(*target, depth + 1) : s;
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
    if (has_any({"properties", "required", "additionalProperties", "patternProperties",
                 "minProperties", "maxProperties", "dependencies", "dependentRequired",
                 "dependentSchemas"}))
      types.push_back("object");
    if (has_any({"items", "minItems", "maxItems", "uniqueItems", "prefixItems", "additionalItems"}))
      types.push_back("array");
    if (has_any({"pattern", "minLength", "maxLength"}) ||
        (s.contains("format") && s["format"].is_string() &&
         format_regex(s["format"].get<std::string>())))
      types.push_back("string");
    // Bounds without a type: numbers satisfy them and can be generated within them.
    if (has_any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}))
      types.push_back("number");
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

  // A non-negative integer keyword; at most `limit`.
  std::optional<int64_t> count(const json& s, const char* key, const std::string& path,
                               int64_t limit = kMaxCount) {
    if (!s.contains(key)) return std::nullopt;
    const json& v = s[key];
    const bool integral = v.is_number_integer() ||
                          (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    if (!integral || v.get<double>() < 0)
      schema_error(path + "/" + key, fmt::format("'{}' must be a non-negative integer", key));
    if (v.get<double>() > static_cast<double>(limit))
      schema_error(path + "/" + key,
                   fmt::format("'{}' = {} is not supported (at most {})", key, v.dump(), limit));
    return static_cast<int64_t>(v.get<double>());
  }

  Pattern string(const json& s, const std::string& path) {
    const auto min_len = count(s, "minLength", path, kMaxStringLength);
    const auto max_len = count(s, "maxLength", path, INT64_MAX);
    const bool lengths = min_len || max_len;
    std::optional<std::string> regex;
    std::string regex_path;
    if (s.contains("format")) {
      const json& f = s["format"];
      if (!f.is_string()) schema_error(path + "/format", "'format' must be a string");
      const std::string name = f.get<std::string>();
      regex = format_regex(name);
      if (regex) {
        regex_path = path + "/format";
      } else if (is_standard_format(name)) {
        schema_error(path + "/format",
                     fmt::format("'format' = '{}' is not supported (supported: {})", name,
                                 generated_formats()));
      }  // else an annotation (json_formats.h)
    }
    if (s.contains("pattern")) {
      const json& p = s["pattern"];
      if (!p.is_string()) schema_error(path + "/pattern", "'pattern' must be a string");
      if (regex)
        schema_error(path + "/pattern", "'pattern' together with 'format' is not supported");
      regex = p.get<std::string>();
      regex_path = path + "/pattern";
    }
    const int64_t lo = min_len.value_or(0), hi = max_len.value_or(-1);
    if (hi >= 0 && hi < lo)
      schema_error(path + "/maxLength",
                   fmt::format("'maxLength' = {} is below 'minLength' = {}", hi, lo));
    if (regex) {
      Pattern content;
      try {
        content = string_regex(*regex);
      } catch (const Error& e) {
        schema_error(regex_path, e.what());
      }
      // Lengths beside a regex: fine when every string of the regex has an
      // allowed length, or when bounding its repetitions makes every string
      // short enough.
      if (lengths) {
        RegexLengths l = regex_lengths(content);
        // Beyond printable ASCII the count may be over (an escape not told
        // apart): only "not empty" is trusted then.
        const bool short_ok = lo == 0 || (l.ascii ? l.min >= lo : lo <= 1 && l.min >= 1);
        bool long_ok = hi < 0 || (l.max >= 0 && l.max <= hi);
        if (short_ok && !long_ok) {
          if (auto bounded = bound_length(content, hi)) {
            content = *bounded;
            long_ok = true;
          }
        }
        if (!short_ok || !long_ok)
          schema_error(regex_path,
                       fmt::format("'{}' together with '{}' is not supported unless every string "
                                   "it matches has an allowed length",
                                   regex_path.substr(regex_path.rfind('/') + 1),
                                   short_ok ? "maxLength" : "minLength"));
      }
      return json_quoted(content);
    }
    return strings_.quoted(lo, hi);
  }

  // A numeric bound; exclusive bounds as numbers (draft 6+) or booleans (draft 4).
  std::optional<double> bound(const json& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return std::nullopt;
    const json& v = s[key];
    if (!v.is_number()) schema_error(path + "/" + key, fmt::format("'{}' must be a number", key));
    return v.get<double>();
  }

  // The bounds of a number as written: the tighter of minimum and
  // exclusiveMinimum (as numbers, or draft 4's boolean), likewise for the maximum.
  struct Bounds {
    std::optional<DecimalBound> lo, hi;
  };
  Bounds bounds(const json& s, const std::string& path) {
    Bounds out;
    for (auto [incl, excl, target, is_min] :
         {std::tuple{"minimum", "exclusiveMinimum", &out.lo, true},
          std::tuple{"maximum", "exclusiveMaximum", &out.hi, false}}) {
      if (s.contains(incl)) {
        bound(s, incl, path);
        *target = DecimalBound{s[incl].dump(), s.contains(excl) && s[excl] == true};
      }
      if (!s.contains(excl) || s[excl].is_boolean()) continue;
      const double v = *bound(s, excl, path);
      // The tighter of the two bounds wins (at equal values, the exclusive one).
      if (!*target || (is_min ? v >= std::strtod((*target)->text.c_str(), nullptr)
                              : v <= std::strtod((*target)->text.c_str(), nullptr)))
        *target = DecimalBound{s[excl].dump(), true};
    }
    return out;
  }

  // multipleOf as a positive integer, nullopt when absent; refused when the
  // multiples cannot be generated exactly (see number()).
  std::optional<json> multiple_of(const json& s, const std::string& path) {
    if (!s.contains("multipleOf")) return std::nullopt;
    const json& m = s["multipleOf"];
    if (!m.is_number() || m.get<double>() <= 0)
      schema_error(path + "/multipleOf", "'multipleOf' must be a number above 0");
    return m;
  }

  // Integers within bounds (a bound that is not an integer rounds inward).
  std::pair<std::optional<int64_t>, std::optional<int64_t>> integer_bounds(
      const json& s, const std::string& path) {
    const Bounds b = bounds(s, path);
    auto clamp = [](double v) { return static_cast<int64_t>(std::clamp(v, -1e17, 1e17)); };
    std::optional<int64_t> ilo, ihi;
    if (b.lo) {
      const double v = std::strtod(b.lo->text.c_str(), nullptr);
      ilo = clamp(b.lo->exclusive ? std::floor(v) + 1 : std::ceil(v));
    }
    if (b.hi) {
      const double v = std::strtod(b.hi->text.c_str(), nullptr);
      ihi = clamp(b.hi->exclusive ? std::ceil(v) - 1 : std::floor(v));
    }
    return {ilo, ihi};
  }

  Pattern integer(const json& s, const std::string& path) {
    const auto [ilo, ihi] = integer_bounds(s, path);
    try {
      if (auto m = multiple_of(s, path)) return integer_multiples(*m, ilo, ihi, path);
      return json_integer(ilo, ihi);
    } catch (const SchemaError&) {
      throw;
    } catch (const Error& e) {
      schema_error(path, fmt::format("the bounds admit no integer: {}", e.what()));
    }
  }

  // Integers that are multiples of m. An integer m: exactly (json_number_range.h).
  // A fraction m = 1/n (0.5, 0.1, 0.01, ...): integers, which are multiples of
  // it, kept within +-kMaxFractionMultiple, where Python's jsonschema, which
  // checks x / m in binary floating point, finds them whole (it would not find
  // 0.07 a multiple of 0.01). Any other m is refused.
  static constexpr int64_t kMaxFractionMultiple = 1000000;
  Pattern integer_multiples(const json& m, std::optional<int64_t> lo, std::optional<int64_t> hi,
                            const std::string& path) {
    const double v = m.get<double>();
    if (std::floor(v) == v && v <= 1e15) {
      try {
        return json_integer_multiples(lo, hi, static_cast<int64_t>(v));
      } catch (const Error& e) {
        schema_error(path + "/multipleOf", e.what());
      }
    }
    const double n = 1 / v;
    if (v < 1 && std::fabs(n - std::round(n)) < 1e-9 && std::round(n) <= 1e9) {
      const int64_t cap = kMaxFractionMultiple;
      try {
        return json_integer(std::max(lo.value_or(-cap), -cap), std::min(hi.value_or(cap), cap));
      } catch (const Error& e) {
        schema_error(path, fmt::format("the bounds admit no integer: {}", e.what()));
      }
    }
    schema_error(path + "/multipleOf",
                 fmt::format("'multipleOf' = {} is not supported (integers, and fractions 1/n "
                             "such as 0.5 or 0.01, are)",
                             m.dump()));
  }

  Pattern number(const json& s, const std::string& path) {
    if (auto m = multiple_of(s, path)) {
      const auto [ilo, ihi] = integer_bounds(s, path);
      try {
        return integer_multiples(*m, ilo, ihi, path);
      } catch (const SchemaError&) {
        throw;
      } catch (const Error& e) {
        schema_error(path, e.what());
      }
    }
    const Bounds b = bounds(s, path);
    if (!b.lo && !b.hi) return json_number();
    try {
      return json_decimal_range(b.lo, b.hi);
    } catch (const Error& e) {
      schema_error(path, fmt::format("the bounds admit no number: {}", e.what()));
    }
  }

  // The rule for `key` and whether it is new: a new rule is declared before its
  // body is compiled, so that the body may call it (recursion through $ref).
  std::pair<int, bool> rule_for(const std::string& key, const std::string& name) {
    auto [it, fresh] = rules_.emplace(key, -1);
    if (fresh) it->second = b_.declare_rule(name);
    return {it->second, fresh};
  }

  // Whether a name matches a patternProperties regex, as the compiled regex
  // reads the name's JSON spelling (the automaton of one rule, no calls).
  bool name_matches(const std::string& regex, const std::string& name, const std::string& path) {
    auto it = name_regexes_.find(regex);
    if (it == name_regexes_.end()) {
      GrammarBuilder gb;
      const int r = gb.declare_rule("name");
      try {
        gb.define_rule(r, json_quoted(compile_json_string_regex(regex)));  // search semantics
        it = name_regexes_.emplace(regex, gb.build(r)).first;
      } catch (const Error& e) {
        schema_error(path, e.what());
      }
    }
    const Grammar& g = *it->second;
    int32_t state = g.root_start();
    for (unsigned char c : json(name).dump(-1, ' ', false, json::error_handler_t::replace)) {
      state = g.next(state, c);
      if (state < 0) return false;
    }
    return g.accepting(state);
  }

  // The schema of a property's value: `own` (nullptr: none) and the schemas
  // of the patternProperties whose regex matches the name, all of which hold.
  Pattern property_value(const json* own, const std::string& own_path, const std::string& name,
                         const json& patterns, const std::string& path) {
    std::vector<json> all;
    std::string where = own_path;
    if (own) all.push_back(*own);
    for (const auto& [regex, sub] : patterns.items())
      if (name_matches(regex, name, path + "/patternProperties/" + json_pointer_token(regex))) {
        all.push_back(sub);
        if (where.empty()) where = path + "/patternProperties/" + json_pointer_token(regex);
      }
    if (all.empty()) return any_value();
    if (all.size() == 1) return value(all[0], where);
    json merged = json::object();
    merged["allOf"] = json::array();
    for (auto& a : all) merged["allOf"].push_back(a);
    return value(merged, path + "/properties/" + json_pointer_token(name) + "/patterns");
  }

  // A property that generation may leave out and that no value satisfies
  // (an enum with no value of the type): left out rather than refused.
  static bool admits_nothing(const json& s) {
    if (!s.is_object()) return s == false;
    if (!s.contains("enum") || !s["enum"].is_array() || !s.contains("type")) return false;
    const json& t = s["type"];
    for (const auto& v : s["enum"]) {
      if (t.is_string() && has_type(v, t.get<std::string>())) return false;
      if (t.is_array())
        for (const auto& x : t)
          if (x.is_string() && has_type(v, x.get<std::string>())) return false;
      if (!t.is_string() && !t.is_array()) return false;
    }
    return true;
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
    const json& patterns = s.contains("patternProperties") ? s["patternProperties"] : empty;
    if (!patterns.is_object())
      schema_error(path + "/patternProperties", "'patternProperties' must be an object");
    std::vector<std::string> required;
    if (s.contains("required")) {
      const json& r = s["required"];
      if (!r.is_array()) schema_error(path + "/required", "'required' must be an array of names");
      for (const auto& v : r) {
        if (!v.is_string())
          schema_error(path + "/required", "'required' must be an array of names");
        if (std::find(required.begin(), required.end(), v.get<std::string>()) == required.end())
          required.push_back(v.get<std::string>());
      }
    }
    const json* additional =
        s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    if (additional && !additional->is_boolean() && !additional->is_object())
      schema_error(path + "/additionalProperties",
                   "'additionalProperties' must be a boolean or a schema");
    const bool closed = additional && additional->is_boolean() && !additional->get<bool>();
    auto is_required = [&](const std::string& name) {
      return std::find(required.begin(), required.end(), name) != required.end();
    };

    // Dependencies. A name's list of dependent names: they become required
    // wherever the name may be written (an ordered generation cannot add them
    // only after it). A name's dependent schema: the name is left out unless
    // required (then refused).
    std::set<std::string> left_out;
    for (const char* key : {"dependencies", "dependentRequired", "dependentSchemas"}) {
      if (!s.contains(key)) continue;
      const json& deps = s[key];
      if (!deps.is_object())
        schema_error(path + "/" + key, fmt::format("'{}' must be an object", key));
      for (int pass = 0; pass < 8; ++pass) {  // dependents of dependents
        for (const auto& [name, dep] : deps.items()) {
          const bool free_keys = props.empty() && required.empty() && !closed;
          const bool may_appear = props.contains(name) || is_required(name) || free_keys;
          if (!may_appear) continue;
          const std::string at = path + "/" + key + "/" + json_pointer_token(name);
          if (dep.is_array()) {
            for (const auto& d : dep) {
              if (!d.is_string()) schema_error(at, "a dependency must list names");
              if (!is_required(d.get<std::string>())) required.push_back(d.get<std::string>());
            }
          } else if (dep == true || (dep.is_object() && dep.empty())) {
            // no constraint
          } else if (is_required(name) || free_keys) {
            schema_error(at, fmt::format("'{}' with a schema for a property that is required or "
                                         "not listed is not supported",
                                         key));
          } else {
            left_out.insert(name);
          }
        }
      }
    }

    const auto min_props = count(s, "minProperties", path, INT64_MAX).value_or(0);
    const auto max_props = count(s, "maxProperties", path, INT64_MAX);
    if (max_props && *max_props < min_props)
      schema_error(
          path + "/maxProperties",
          fmt::format("'maxProperties' = {} is below 'minProperties' = {}", *max_props, min_props));

    Pattern body;
    if (props.empty() && required.empty()) {
      // A map: keys of the patternProperties regexes with values that satisfy
      // every pattern's schema (a key may match several); without patterns,
      // any keys with values of the additionalProperties schema (any value
      // without one); none when additionalProperties is false.
      std::vector<Pattern> entries;
      if (!patterns.empty()) {
        json every = json::object();
        every["allOf"] = json::array();
        for (const auto& [regex, sub] : patterns.items()) every["allOf"].push_back(sub);
        const Pattern v =
            patterns.size() == 1
                ? value(patterns.begin().value(),
                        path + "/patternProperties/" + json_pointer_token(patterns.begin().key()))
                : value(every, path + "/patternProperties");
        for (const auto& [regex, sub] : patterns.items()) {
          Pattern key;
          try {
            key = json_quoted(string_regex(regex));
          } catch (const Error& e) {
            schema_error(path + "/patternProperties/" + json_pointer_token(regex), e.what());
          }
          entries.push_back(Pattern::seq({key, ws, Pattern::byte(':'), ws, v, ws}));
        }
      } else if (!closed) {
        const Pattern v = additional && additional->is_object()
                              ? value(*additional, path + "/additionalProperties")
                              : any_value();
        entries.push_back(Pattern::seq({json_string(), ws, Pattern::byte(':'), ws, v, ws}));
      }
      if (entries.empty()) {
        if (min_props > 0)
          schema_error(path + "/minProperties",
                       "'minProperties' above 0 with no property allowed admits no value");
        body = Pattern();
      } else {
        // The grammar cannot keep a map's keys apart: a key written twice parses
        // as one property, so a count of properties above one is not what the
        // generated members would give.
        if (min_props > 1)
          schema_error(path + "/minProperties",
                       fmt::format("'minProperties' = {} on an object whose keys are not listed "
                                   "is not supported (a repeated key would count once)",
                                   min_props));
        const Pattern entry = Pattern::alt(std::move(entries));
        const int64_t lo = std::min<int64_t>(min_props, kMaxCount + 1);
        if (lo > kMaxCount)
          schema_error(path + "/minProperties",
                       fmt::format("'minProperties' = {} is not supported (at most {})", min_props,
                                   kMaxCount));
        const int64_t hi = max_props ? std::min<int64_t>(*max_props, kMaxCount) : -1;
        if (hi == 0) {
          body = Pattern();
        } else {
          body =
              Pattern::seq({entry, Pattern::repeat(Pattern::seq({Pattern::byte(','), ws, entry}),
                                                   static_cast<int>(std::max<int64_t>(lo - 1, 0)),
                                                   hi < 0 ? -1 : static_cast<int>(hi - 1))});
          if (lo == 0) body = Pattern::optional(body);
        }
      }
    } else {
      std::vector<Pattern> items;
      std::vector<bool> flags;
      auto member = [&](const std::string& name, const Pattern& v) {
        return Pattern::seq({json_literal(json(name)), ws, Pattern::byte(':'), ws, v, ws});
      };
      for (const auto& [name, sub] : props.items()) {
        const bool req = is_required(name);
        if (!req && (left_out.count(name) || admits_nothing(sub))) continue;
        const std::string at = path + "/properties/" + json_pointer_token(name);
        items.push_back(member(name, property_value(&sub, at, name, patterns, path)));
        flags.push_back(req);
      }
      for (const auto& name : required) {
        if (props.contains(name)) continue;
        bool matched = false;
        for (const auto& [regex, sub] : patterns.items())
          matched |=
              name_matches(regex, name, path + "/patternProperties/" + json_pointer_token(regex));
        if (matched) {
          items.push_back(member(name, property_value(nullptr, "", name, patterns, path)));
        } else if (closed) {
          schema_error(path + "/required",
                       fmt::format("'{}' is required but not in 'properties', and "
                                   "'additionalProperties' is false",
                                   name));
        } else if (additional && additional->is_object()) {
          items.push_back(member(name, value(*additional, path + "/additionalProperties")));
        } else {
          items.push_back(member(name, any_value()));
        }
        flags.push_back(true);
      }
      // minProperties/maxProperties: counted only where they bind.
      const int64_t n = static_cast<int64_t>(items.size());
      int64_t n_required = 0;
      for (bool f : flags) n_required += f;
      if (min_props > n)
        schema_error(path + "/minProperties",
                     fmt::format("'minProperties' = {} is more than the {} properties generated "
                                 "(the listed and required ones)",
                                 min_props, n));
      if (max_props && *max_props < n_required)
        schema_error(path + "/maxProperties",
                     fmt::format("'maxProperties' = {} is less than the {} required properties",
                                 *max_props, n_required));
      const int lo = min_props > n_required ? static_cast<int>(min_props) : 0;
      const int hi = max_props && *max_props < n ? static_cast<int>(*max_props) : -1;
      const int64_t tracked = hi >= 0 ? hi : lo;
      if (static_cast<size_t>(n * (tracked + 1)) > kMaxMembersCounted)
        schema_error(path + (hi >= 0 ? "/maxProperties" : "/minProperties"),
                     fmt::format("counting {} properties up to {} is not supported", n, tracked));
      body = Pattern::members(std::move(items), std::move(flags),
                              Pattern::seq({Pattern::byte(','), ws}), lo, hi);
    }
    b_.define_rule(rule, Pattern::seq({Pattern::byte('{'), ws, body, Pattern::byte('}')}));
    return rule;
  }

  // The values an item schema lists, when it does (enum, const, boolean, null).
  std::optional<std::vector<json>> item_values(const json& schema) {
    const json& s = resolved(schema);
    if (!s.is_object()) return std::nullopt;
    if (auto listed = listed_values(s)) {
      std::vector<json> out;
      std::vector<std::string> types;
      try {
        types = types_of(s, "");
      } catch (const SchemaError&) {
        return std::nullopt;
      }
      for (const auto& v : *listed) {
        bool ok = types.empty();
        for (const auto& t : types) ok |= has_type(v, t);
        if (ok && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
      }
      return out;
    }
    if (s.contains("type") && s["type"] == "boolean" && s.size() == 1)
      return std::vector<json>{true, false};
    if (s.contains("type") && s["type"] == "null" && s.size() == 1)
      return std::vector<json>{nullptr};
    return std::nullopt;
  }

  int array_rule(const json& s, const std::string& path) {
    const auto [rule, fresh_rule] = rule_for(path + "#array", show(path));
    if (!fresh_rule) return rule;
    FreshInlineStack fresh(inline_stack_);

    int64_t min = count(s, "minItems", path).value_or(0);
    std::optional<int64_t> max = count(s, "maxItems", path, INT64_MAX);
    if (max && *max < min)
      schema_error(path + "/maxItems",
                   fmt::format("'maxItems' = {} is below 'minItems' = {}", *max, min));
    // Fewer items than maxItems allows are as valid: longer arrays are not counted.
    if (max && *max > kMaxCount) max = std::max<int64_t>(kMaxCount, min);
    const bool unique = s.contains("uniqueItems") && s["uniqueItems"] == true;
    const Pattern ws = json_whitespace();
    const Pattern comma = Pattern::seq({Pattern::byte(','), ws});

    // A tuple: items as an array (drafts 4 to 2019) or prefixItems (2020).
    const bool tuple = (s.contains("items") && s["items"].is_array()) || s.contains("prefixItems");
    if (tuple) {
      const char* list_key = s.contains("prefixItems") ? "prefixItems" : "items";
      const char* rest_key = s.contains("prefixItems") ? "items" : "additionalItems";
      const json& list = s[list_key];
      if (!list.is_array()) schema_error(path + "/" + list_key, "a tuple must be an array");
      const json* rest = s.contains(rest_key) ? &s[rest_key] : nullptr;
      // All listed items (fewer when maxItems says so), then items of the rest
      // schema, as many as minItems needs and as maxItems allows.
      const int64_t k =
          std::min<int64_t>(static_cast<int64_t>(list.size()), max.value_or(INT64_MAX));
      std::vector<Pattern> seq;
      for (int64_t i = 0; i < k; ++i) {
        if (i > 0) seq.push_back(comma);
        seq.push_back(item_call(list[i], fmt::format("{}/{}/{}", path, list_key, i)));
        seq.push_back(ws);
      }
      const int64_t more_min = std::max<int64_t>(min - k, 0);
      const bool rest_open = rest && *rest != false;
      if (more_min > 0 && !rest_open && rest)
        schema_error(path + "/minItems", "'minItems' asks for more items than the tuple allows");
      if (unique && (k + more_min > 1 || (rest_open && max.value_or(2) > 1)))
        schema_error(path + "/uniqueItems",
                     "'uniqueItems' on a tuple of more than one item is not supported");
      if (more_min > kMaxCount)
        schema_error(path + "/minItems", fmt::format("'minItems' = {} is not supported", min));
      if (rest_open || more_min > 0) {
        const Pattern item = item_call(rest && rest->is_object() ? *rest : json(true),
                                       rest && rest->is_object() ? path + "/" + rest_key : "");
        const int more_max =
            rest_open ? (max ? static_cast<int>(*max - k) : -1) : static_cast<int>(more_min);
        if (more_max != 0) {
          const Pattern one = Pattern::seq({item, ws});
          const Pattern tail =
              Pattern::repeat(Pattern::seq({comma, one}), static_cast<int>(more_min), more_max);
          if (k > 0) {
            seq.push_back(tail);
          } else {
            Pattern b = Pattern::seq(
                {one, Pattern::repeat(Pattern::seq({comma, one}),
                                      static_cast<int>(std::max<int64_t>(more_min - 1, 0)),
                                      more_max < 0 ? -1 : more_max - 1)});
            seq.push_back(more_min == 0 ? Pattern::optional(b) : b);
          }
        }
      }
      b_.define_rule(rule, Pattern::seq({Pattern::byte('['), ws, Pattern::seq(std::move(seq)),
                                         Pattern::byte(']')}));
      return rule;
    }

    const json item_schema = s.contains("items") ? s["items"] : json(true);
    const std::string item_path = s.contains("items") ? path + "/items" : "";
    Pattern body;
    // uniqueItems: distinct listed values in the order of the list; otherwise
    // at most one item (where minItems allows), which is always unique.
    std::optional<std::vector<json>> values;
    if (unique) values = item_values(item_schema);
    if (unique && values) {
      if (static_cast<int64_t>(values->size()) < min)
        schema_error(path + "/uniqueItems",
                     fmt::format("'uniqueItems' with {} distinct values and 'minItems' = {} "
                                 "admits no value",
                                 values->size(), min));
      std::vector<Pattern> members;
      for (const auto& v : *values) members.push_back(Pattern::seq({literal_of(v, item_path), ws}));
      const int n = static_cast<int>(members.size());
      const int hi = max && *max < n ? static_cast<int>(*max) : -1;
      const int lo = static_cast<int>(min);
      if (static_cast<size_t>(n) * (static_cast<size_t>(hi >= 0 ? hi : lo) + 1) >
          kMaxMembersCounted)
        schema_error(path + "/uniqueItems",
                     fmt::format("'uniqueItems' over {} values is not supported", n));
      body = Pattern::members(std::move(members), std::vector<bool>(n, false), comma, lo, hi);
    } else {
      if (unique) {
        if (min > 1)
          schema_error(path + "/uniqueItems",
                       "'uniqueItems' with 'minItems' above 1 is supported only for items that "
                       "list their values (enum, const, boolean)");
        max = std::min<int64_t>(max.value_or(1), 1);
      }
      const Pattern item = item_call(item_schema, item_path);
      if (max && *max == 0) {
        body = Pattern();
      } else {
        const Pattern more = Pattern::seq({Pattern::byte(','), ws, item, ws});
        body = Pattern::seq({item, ws,
                             Pattern::repeat(more, static_cast<int>(std::max<int64_t>(min - 1, 0)),
                                             max ? static_cast<int>(*max - 1) : -1)});
        if (min == 0) body = Pattern::optional(body);
      }
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
  SchemaRefs refs_;
  SchemaMerger merger_;
  GrammarBuilder b_;
  StringLengths strings_;
  std::map<std::string, std::shared_ptr<const Grammar>> name_regexes_;
  std::map<std::string, std::string> merged_paths_;  // merged schema's text -> its path
  std::map<std::string, int> rules_;
  std::vector<std::string> inline_stack_;
  // The rules of free-form objects and arrays, by nesting level (-1: not yet made).
  std::vector<int> any_object_ = std::vector<int>(kMaxFreeDepth, -1);
  std::vector<int> any_array_ = std::vector<int>(kMaxFreeDepth, -1);
  int depth_ = 0;  // value() calls in progress
};

}  // namespace

std::string json_pointer_token(std::string_view key) {
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
