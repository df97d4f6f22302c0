// JSON Schema to grammar: the documents a constrained model may write.
//
// What is generated (each choice keeps every output valid against the schema):
//  - objects: the listed properties in the schema's order, the required ones
//    always, the others optionally; no other properties, whether
//    additionalProperties is false, true or absent. An object schema without
//    properties takes any keys: values of the additionalProperties schema when
//    it is one, else any JSON value. Required names that are not listed are
//    generated after the listed ones with any value (refused when
//    additionalProperties is false).
//  - arrays: items (any value when absent), minItems/maxItems (at most kMaxCount).
//  - strings: enum, const, pattern (see regex.h), minLength/maxLength (at most
//    kMaxCount), format date, time, date-time, uuid, ipv4.
//  - integers with minimum/maximum/exclusiveMinimum/exclusiveMaximum; numbers
//    (bounds on non-integer numbers are refused); booleans; null.
//  - anyOf, oneOf (generated as anyOf: alternatives should not overlap), allOf
//    of one schema, a "type" array, nullable (OpenAPI), local $ref ("#...",
//    "#/$defs/...", "#/definitions/...") including recursion through objects or
//    arrays.
//  - whitespace between the tokens of the document: at most kMaxWhitespace
//    characters (json_lexical.h); none before or after the whole document.
//  - free-form values (json_object, a `true` or `{}` schema, items without a
//    schema): at most kMaxFreeDepth objects and arrays deep, the free-form
//    value itself included, so that a model cannot open object after object
//    until it runs out of tokens.
// Annotations (title, description, default, examples, ...) and unknown
// keywords are ignored, as JSON Schema prescribes. Anything else is refused
// with a SchemaError naming the keyword and where it is.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "structured/grammar.h"

namespace tandem::structured {

inline constexpr int kMaxCount = 256;    // the largest minItems/maxItems/minLength/maxLength
inline constexpr int kMaxFreeDepth = 6;  // nesting within a free-form value

struct SchemaError : Error {
  SchemaError(std::string path, const std::string& what);
  std::string path;  // a JSON pointer into the schema, "" for its root
};

// Throws SchemaError for a schema that tandem cannot generate for. The schema is
// an ordered_json so that properties keep the order the schema gives them.
std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::ordered_json& schema);
// A document of the schema with fixed text around it: `prefix` before and
// `suffix` after (a tool call's markup around its JSON object).
std::shared_ptr<const Grammar> compile_json_schema(const nlohmann::ordered_json& schema,
                                                   std::string_view prefix,
                                                   std::string_view suffix);
// Any JSON object (response_format {"type": "json_object"}).
std::shared_ptr<const Grammar> any_json_object_grammar();

}  // namespace tandem::structured
