// A JSON Schema validator for the subset that src/structured generates for,
// written independently of it, so that tests can check generated documents:
// type (with integer), enum, const, anyOf, oneOf (exactly one), allOf, local
// $ref, nullable, properties, required, additionalProperties, items, minItems,
// maxItems, minLength/maxLength (in code points), pattern (std::regex,
// ECMAScript, searched; ASCII patterns), format (date, time, date-time, uuid,
// ipv4), minimum, maximum, exclusiveMinimum, exclusiveMaximum.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace tandem::test {

// "" when `instance` is valid against `schema` (whose $refs resolve in `root`),
// else where and why it is not.
std::string schema_violation(const nlohmann::json& instance, const nlohmann::json& schema,
                             const nlohmann::json& root);
inline std::string schema_violation(const nlohmann::json& instance, const nlohmann::json& schema) {
  return schema_violation(instance, schema, schema);
}

}  // namespace tandem::test
