#include "structured/schema_merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "structured/json_schema.h"

namespace tandem::structured {
namespace {

using json = nlohmann::ordered_json;

constexpr int kMaxMergeDepth = 64;
constexpr int kMaxMergeSteps = 1024;  // merges (distributed alternatives tried) per merged schema

// No value satisfies the parts: an alternative being distributed is dropped,
// a merge as a whole is refused.
struct Unsatisfiable : SchemaError {
  using SchemaError::SchemaError;
};

// Keywords that only describe (dropped when merging).
bool is_dropped(const std::string& key) {
  static const std::set<std::string, std::less<>> kDropped = {
      "$schema", "$id",         "id",      "$anchor",  "$comment", "$defs",     "definitions",
      "title",   "description", "default", "examples", "readOnly", "writeOnly", "deprecated"};
  return kDropped.count(key) > 0;
}

const std::set<std::string, std::less<>> kLowerBounds = {
    "minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"};
const std::set<std::string, std::less<>> kUpperBounds = {
    "maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"};
// Keywords whose schemas (or maps of schemas) merge with allOf.
const std::set<std::string, std::less<>> kSchemaValued = {"items", "additionalProperties",
                                                          "propertyNames", "contains"};

json all_of(const std::vector<json>& schemas) {
  if (schemas.size() == 1) return schemas[0];
  json a = json::array();
  for (const auto& s : schemas) a.push_back(s);
  return json{{"allOf", a}};
}

class Merge {
 public:
  Merge(const SchemaRefs& refs, const SchemaMerger::Disjoint& disjoint, std::string path)
      : refs_(refs), disjoint_(disjoint), path_(std::move(path)) {}

  // `part` and what its $ref and allOf bring, as parts without either.
  void expand(const json& part, std::vector<json>& out, int depth) const {
    if (depth > kMaxMergeDepth)
      throw SchemaError(path_, fmt::format("allOf and $ref nested deeper than {} levels are not "
                                           "supported",
                                           kMaxMergeDepth));
    if (part.is_boolean()) {
      if (!part.get<bool>()) throw Unsatisfiable(path_, "allOf holds the schema 'false'");
      return;
    }
    if (!part.is_object()) throw SchemaError(path_, "a schema must be an object or a boolean");
    json own = part;
    if (part.contains("$ref")) {
      if (!part["$ref"].is_string()) throw SchemaError(path_ + "/$ref", "'$ref' must be a string");
      own.erase("$ref");
      expand(*refs_.resolve(part["$ref"].get<std::string>(), path_).node, out, depth + 1);
    }
    if (part.contains("allOf")) {
      const json& all = part["allOf"];
      if (!all.is_array() || all.empty())
        throw SchemaError(path_ + "/allOf", "'allOf' must be a non-empty array");
      own.erase("allOf");
      for (const auto& sub : all) expand(sub, out, depth + 1);
    }
    normalize(own);
    if (!own.empty()) out.push_back(std::move(own));
  }

  json merge(std::vector<json> parts, int depth) const {
    // Distributing nested anyOf/oneOf multiplies alternatives: bound the work.
    if (++steps_ > kMaxMergeSteps)
      throw SchemaError(path_, fmt::format("'anyOf'/'oneOf' beside other keywords combine into "
                                           "more than {} merges",
                                           kMaxMergeSteps));
    for (size_t i = 0; i < parts.size(); ++i) {
      for (const char* key : {"anyOf", "oneOf"}) {
        if (!parts[i].contains(key)) continue;
        const json alts = parts[i][key];
        if (!alts.is_array() || alts.empty())
          throw SchemaError(path_, fmt::format("'{}' must be a non-empty array", key));
        parts[i].erase(key);
        std::vector<json> out;
        for (const auto& alt : alts) {
          try {
            std::vector<json> with = parts;
            expand(alt, with, depth + 1);
            json m = merge(std::move(with), depth + 1);
            if (m.size() == 1 && m.contains("anyOf"))
              for (const auto& a : m["anyOf"]) out.push_back(a);
            else
              out.push_back(std::move(m));
          } catch (const Unsatisfiable&) {
            // this alternative contradicts the rest: generation never picks it
          }
          if (out.size() > static_cast<size_t>(kMaxDistributed))
            throw SchemaError(path_, fmt::format("'{}' beside other keywords makes more than {} "
                                                 "alternatives",
                                                 key, kMaxDistributed));
        }
        if (out.empty())
          throw Unsatisfiable(path_, fmt::format("no alternative of '{}' agrees with the "
                                                 "keywords beside it",
                                                 key));
        json a = json::array();
        for (auto& o : out) a.push_back(std::move(o));
        // oneOf is generated as anyOf: its alternatives, merged with what
        // stands beside them, must not overlap.
        if (std::string_view(key) == "oneOf") tell_apart(a);
        if (a.size() == 1) return a[0];
        return json{{"anyOf", a}};
      }
    }
    return combine(parts);
  }

 private:
  static std::set<std::string> required_of(const json& s) {
    std::set<std::string> out;
    if (s.contains("required") && s["required"].is_array())
      for (const auto& r : s["required"])
        if (r.is_string()) out.insert(r.get<std::string>());
    return out;
  }

  // A name that y requires and x does not, which x can leave out: x lists its
  // names (so generates no others) and has no dependencies that could require
  // the name after all. Empty when there is none.
  static std::string name_to_leave_out(const json& x, const json& y) {
    if (!x.is_object() || !y.is_object()) return "";
    const bool listed =
        (x.contains("properties") && x["properties"].is_object() && !x["properties"].empty()) ||
        x.contains("required");
    if (!listed || x.contains("dependencies") || x.contains("dependentRequired") ||
        x.contains("patternProperties"))
      return "";
    const auto rx = required_of(x);
    for (const auto& name : required_of(y))
      if (!rx.count(name)) return name;
    return "";
  }

  // oneOf's merged alternatives, each pair made disjoint (or refused).
  void tell_apart(json& alts) const {
    for (size_t i = 0; i < alts.size(); ++i)
      for (size_t j = i + 1; j < alts.size(); ++j) {
        if (disjoint_(alts[i], alts[j])) continue;
        const std::string p = name_to_leave_out(alts[i], alts[j]);
        const std::string q = name_to_leave_out(alts[j], alts[i]);
        if (p.empty() || q.empty())
          throw SchemaError(path_ + "/oneOf",
                            fmt::format("'oneOf' alternatives {} and {} may both match a value, "
                                        "which generation cannot rule out (alternatives need "
                                        "different types, different const/enum values of a "
                                        "required property, or each a required property the "
                                        "other does not require; or use 'anyOf')",
                                        i, j));
        if (alts[i].contains("properties")) alts[i]["properties"].erase(p);
        if (alts[j].contains("properties")) alts[j]["properties"].erase(q);
      }
  }

  // Draft 4's boolean exclusive bounds as numbers, OpenAPI's nullable as a type.
  static void normalize(json& s) {
    for (auto [excl, incl] :
         {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
      if (!s.contains(excl) || !s[excl].is_boolean()) continue;
      if (s[excl].get<bool>() && s.contains(incl)) {
        s[excl] = s[incl];
        s.erase(incl);
      } else {
        s.erase(excl);
      }
    }
    if (s.contains("nullable")) {
      if (s["nullable"] == true && s.contains("type")) {
        json t = s["type"].is_array() ? s["type"] : json::array({s["type"]});
        if (std::find(t.begin(), t.end(), json("null")) == t.end()) t.push_back("null");
        s["type"] = t;
      }
      s.erase("nullable");
    }
  }

  static std::set<std::string> types_of(const json& t) {
    std::set<std::string> out;
    if (t.is_string()) out.insert(t.get<std::string>());
    if (t.is_array())
      for (const auto& v : t)
        if (v.is_string()) out.insert(v.get<std::string>());
    return out;
  }

  static std::set<std::string> intersect_types(const std::set<std::string>& a,
                                               const std::set<std::string>& b) {
    std::set<std::string> out;
    for (const auto& t : a) {
      if (b.count(t)) out.insert(t);
      if (t == "integer" && b.count("number")) out.insert("integer");
      if (t == "number" && b.count("integer")) out.insert("integer");
    }
    return out;
  }

  static int64_t gcd(int64_t a, int64_t b) { return b == 0 ? a : gcd(b, a % b); }

  // The multipleOf that both m and n require, or nullopt where it cannot be written.
  static std::optional<json> common_multiple(const json& m, const json& n) {
    if (m == n) return m;
    if (m.is_number_integer() && n.is_number_integer() && m.get<int64_t>() > 0 &&
        n.get<int64_t>() > 0) {
      const int64_t a = m.get<int64_t>(), b = n.get<int64_t>();
      const int64_t l = a / gcd(a, b);
      if (l <= (int64_t{1} << 40) / b) return json(l * b);
      return std::nullopt;
    }
    const double a = m.get<double>(), b = n.get<double>();
    const double big = std::max(a, b), small = std::min(a, b);
    if (small > 0 && std::floor(big / small) == big / small) return a > b ? m : n;
    return std::nullopt;
  }

  json combine(const std::vector<json>& parts) const {
    json out = json::object();
    std::vector<std::string> prop_order;
    std::set<std::string> seen_props;
    for (const auto& p : parts) {
      if (p.contains("properties") && p["properties"].is_object())
        for (const auto& [k, v] : p["properties"].items())
          if (seen_props.insert(k).second) prop_order.push_back(k);
    }
    std::vector<std::string> required;
    for (const auto& p : parts) {
      for (const auto& [key, v] : p.items()) {
        if (is_dropped(key) || key == "properties" || key == "additionalProperties") continue;
        if (key == "required") {
          if (!v.is_array()) throw SchemaError(path_ + "/required", "'required' must be an array");
          for (const auto& r : v)
            if (r.is_string() &&
                std::find(required.begin(), required.end(), r.get<std::string>()) == required.end())
              required.push_back(r.get<std::string>());
          continue;
        }
        if (!out.contains(key)) {
          out[key] = v;
          continue;
        }
        json& cur = out[key];
        if (key == "type") {
          const auto t = intersect_types(types_of(cur), types_of(v));
          if (t.empty()) throw Unsatisfiable(path_ + "/type", "the parts allow no common type");
          json a = json::array();
          for (const auto& x : t) a.push_back(x);
          cur = a.size() == 1 ? a[0] : a;
        } else if (key == "enum" || key == "const") {
          json a = json::array();
          const json mine = key == "enum" ? cur : json::array({cur});
          const json theirs = key == "enum" ? v : json::array({v});
          if (!mine.is_array() || !theirs.is_array())
            throw SchemaError(path_ + "/enum", "'enum' must be an array");
          for (const auto& x : mine)
            if (std::find(theirs.begin(), theirs.end(), x) != theirs.end()) a.push_back(x);
          if (a.empty()) throw Unsatisfiable(path_ + "/" + key, "the parts share no value");
          cur = key == "enum" ? a : a[0];
        } else if (kLowerBounds.count(key) || kUpperBounds.count(key)) {
          if (!cur.is_number() || !v.is_number())
            throw SchemaError(path_ + "/" + key, fmt::format("'{}' must be a number", key));
          const bool lower = kLowerBounds.count(key) > 0;
          if (lower ? v.get<double>() > cur.get<double>() : v.get<double>() < cur.get<double>())
            cur = v;
        } else if (key == "uniqueItems") {
          cur = cur == true || v == true;
        } else if (key == "multipleOf") {
          if (!cur.is_number() || !v.is_number())
            throw SchemaError(path_ + "/multipleOf", "'multipleOf' must be a number");
          auto m = common_multiple(cur, v);
          if (!m)
            throw SchemaError(path_ + "/multipleOf",
                              fmt::format("'allOf' needing multiples of both {} and {} is not "
                                          "supported",
                                          cur.dump(), v.dump()));
          cur = *m;
        } else if (kSchemaValued.count(key) && !cur.is_array() && !v.is_array()) {
          cur = all_of({cur, v});
        } else if (key == "patternProperties" || key == "dependencies" ||
                   key == "dependentRequired" || key == "dependentSchemas") {
          if (!cur.is_object() || !v.is_object())
            throw SchemaError(path_ + "/" + key, fmt::format("'{}' must be an object", key));
          for (const auto& [name, x] : v.items()) {
            if (!cur.contains(name))
              cur[name] = x;
            else if (cur[name].is_array() && x.is_array())
              for (const auto& n : x) cur[name].push_back(n);
            else if (!cur[name].is_array() && !x.is_array())
              cur[name] = all_of({cur[name], x});
            else
              throw SchemaError(
                  path_ + "/" + key,
                  fmt::format("'allOf' merging '{}' of '{}' is not supported", key, name));
          }
        } else if (cur != v) {
          throw SchemaError(path_ + "/" + key,
                            fmt::format("'allOf' whose parts have different '{}' ({} and {}) is "
                                        "not supported",
                                        key, cur.dump().substr(0, 60), v.dump().substr(0, 60)));
        }
      }
    }
    // Objects: each name's schemas, and whether a closed part drops it.
    bool any_object_part = false;
    std::vector<json> additional;
    bool closed = false;
    for (const auto& p : parts) {
      if (!p.contains("additionalProperties")) continue;
      any_object_part = true;
      const json& a = p["additionalProperties"];
      if (a == false) closed = true;
      if (a.is_object()) additional.push_back(a);
    }
    if (!prop_order.empty()) {
      json props = json::object();
      for (const auto& name : prop_order) {
        std::vector<json> schemas;
        bool dropped = false;
        for (const auto& p : parts) {
          const bool lists = p.contains("properties") && p["properties"].is_object() &&
                             p["properties"].contains(name);
          if (lists) {
            schemas.push_back(p["properties"][name]);
          } else if (p.contains("additionalProperties")) {
            const json& a = p["additionalProperties"];
            if (a == false) dropped = true;
            if (a.is_object()) schemas.push_back(a);
          }
        }
        if (dropped) {
          if (std::find(required.begin(), required.end(), name) != required.end())
            throw Unsatisfiable(path_ + "/required",
                                fmt::format("'{}' is required but a part of allOf does not "
                                            "allow it",
                                            name));
          continue;
        }
        // Plain schemas merge now (so that oneOf's disjointness check sees
        // their const/enum); others when the compiler reaches them.
        const bool plain =
            schemas.size() > 1 && std::all_of(schemas.begin(), schemas.end(), [](const json& x) {
              return x.is_object() && !x.contains("$ref") && !x.contains("allOf") &&
                     !x.contains("anyOf") && !x.contains("oneOf");
            });
        if (!plain) {
          props[name] = all_of(schemas);
          continue;
        }
        try {
          std::vector<json> normalized = schemas;
          for (auto& x : normalized) normalize(x);
          props[name] = combine(normalized);
        } catch (const Unsatisfiable&) {
          if (std::find(required.begin(), required.end(), name) != required.end()) throw;
        }
      }
      out["properties"] = props;
    }
    if (any_object_part) {
      if (closed)
        out["additionalProperties"] = false;
      else if (!additional.empty())
        out["additionalProperties"] = all_of(additional);
    }
    if (!required.empty()) {
      json r = json::array();
      for (const auto& n : required) r.push_back(n);
      out["required"] = r;
    }
    return out;
  }

  const SchemaRefs& refs_;
  const SchemaMerger::Disjoint& disjoint_;
  std::string path_;
  mutable int steps_ = 0;
};

}  // namespace

bool is_validation_keyword(std::string_view key) {
  static const std::set<std::string, std::less<>> kValidation = {"type",
                                                                 "enum",
                                                                 "const",
                                                                 "anyOf",
                                                                 "oneOf",
                                                                 "allOf",
                                                                 "$ref",
                                                                 "not",
                                                                 "if",
                                                                 "then",
                                                                 "else",
                                                                 "properties",
                                                                 "required",
                                                                 "additionalProperties",
                                                                 "patternProperties",
                                                                 "propertyNames",
                                                                 "minProperties",
                                                                 "maxProperties",
                                                                 "dependencies",
                                                                 "dependentRequired",
                                                                 "dependentSchemas",
                                                                 "unevaluatedProperties",
                                                                 "items",
                                                                 "prefixItems",
                                                                 "additionalItems",
                                                                 "unevaluatedItems",
                                                                 "contains",
                                                                 "minContains",
                                                                 "maxContains",
                                                                 "minItems",
                                                                 "maxItems",
                                                                 "uniqueItems",
                                                                 "minLength",
                                                                 "maxLength",
                                                                 "pattern",
                                                                 "format",
                                                                 "minimum",
                                                                 "maximum",
                                                                 "exclusiveMinimum",
                                                                 "exclusiveMaximum",
                                                                 "multipleOf",
                                                                 "nullable",
                                                                 "$dynamicRef",
                                                                 "$recursiveRef"};
  return kValidation.count(key) > 0;
}

bool needs_merge(const json& s) {
  if (!s.is_object()) return false;
  if (s.contains("allOf")) return true;
  int anchors = 0, others = 0;
  for (const auto& [key, v] : s.items()) {
    if (key == "$ref" || key == "anyOf" || key == "oneOf")
      ++anchors;
    else if (is_validation_keyword(key))
      ++others;
  }
  return anchors > 1 || (anchors == 1 && others > 0);
}

SchemaMerger::SchemaMerger(const SchemaRefs& refs, Disjoint disjoint)
    : refs_(refs), disjoint_(std::move(disjoint)) {}

json SchemaMerger::merge(const json& s, const std::string& path) const {
  Merge m(refs_, disjoint_, path);
  std::vector<json> parts;
  m.expand(s, parts, 0);
  if (parts.empty()) return json::object();
  return m.merge(std::move(parts), 0);
}

}  // namespace tandem::structured
