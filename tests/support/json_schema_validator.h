// A JSON Schema validator for the subset that src/structured generates for,
// written independently of it, so that tests can check generated documents:
// type (with integer), enum, const, anyOf, oneOf (exactly one), allOf, $ref
// within the document (pointers, percent-encoded; anchors; $id; keywords beside
// it ignored, as in draft 7), nullable, properties, required, additionalProperties,
// patternProperties, minProperties, maxProperties, dependencies,
// dependentRequired, dependentSchemas, items (also as a tuple), prefixItems,
// additionalItems, minItems, maxItems, uniqueItems, minLength/maxLength (in
// code points), pattern (std::regex, ECMAScript, searched; ASCII patterns),
// format (date and date-time on the calendar, time, uuid, ipv4, ipv6,
// hostname, email, uri, uri-reference, regex), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (numbers, or draft 4's booleans),
// multipleOf (to a relative 1e-9).
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
