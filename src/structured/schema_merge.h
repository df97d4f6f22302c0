// Schemas that must all hold, merged into one: allOf, and the keywords beside
// a $ref, an anyOf or a oneOf (a schema {"type": "object", "properties": ...,
// "oneOf": [...]} asks for both its own keywords and one alternative).
//
// How (each rule keeps the merged schema's values valid against every part):
//  - $ref and allOf at the top of a part are expanded into more parts;
//  - anyOf and oneOf are distributed: A and (B or C) = (A and B) or (A and C),
//    alternatives that no value satisfies dropped, at most kMaxDistributed;
//    merged oneOf alternatives that may overlap are told apart by required
//    names: where y requires a name that x does not, x leaves it out (so x's
//    documents fail y), both ways, else the oneOf is refused;
//  - type and enum/const intersect; minimum-like bounds take the larger,
//    maximum-like the smaller; required, and unique items, accumulate;
//  - properties: a name's schemas from every part that lists it, plus the
//    additionalProperties schema of parts that do not; a part whose
//    additionalProperties is false drops the names it does not list;
//  - items, additionalProperties, patternProperties and dependencies merge
//    their schemas with allOf, left for the compiler to merge in turn;
//  - two different patterns, formats or multipleOf that do not divide each
//    other cannot be merged: SchemaError naming the keyword.
// Annotations and $defs/definitions are dropped ($refs name places in the
// root, which stays).
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "structured/schema_refs.h"

namespace tandem::structured {

inline constexpr int kMaxDistributed = 64;  // alternatives after distributing anyOf/oneOf

// Whether JSON Schema's `key` constrains values (the rest are annotations,
// $defs, vendor extensions and unknown keywords, all ignored).
bool is_validation_keyword(std::string_view key);

// Whether `s` must be merged: it holds allOf, or $ref, anyOf or oneOf beside
// other validation keywords.
bool needs_merge(const nlohmann::ordered_json& s);

class SchemaMerger {
 public:
  // Whether no value can satisfy both schemas, as far as the caller can
  // tell (oneOf is generated as anyOf, so its alternatives must not overlap).
  using Disjoint =
      std::function<bool(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b)>;

  SchemaMerger(const SchemaRefs& refs, Disjoint disjoint);

  // The merged schema: no allOf or $ref at its top, anyOf only alone. Throws
  // SchemaError (at `path` or below) when no value satisfies all parts or the
  // parts cannot be merged.
  nlohmann::ordered_json merge(const nlohmann::ordered_json& s, const std::string& path) const;

 private:
  const SchemaRefs& refs_;
  Disjoint disjoint_;
};

}  // namespace tandem::structured
