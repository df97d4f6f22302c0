// JSON Schema to grammar: the documents a constrained model may write.
//
// What is generated (each choice keeps every output valid against the schema;
// where a keyword allows more than is generated, the output is a subset):
//  - objects: the listed properties in the schema's order, the required ones
//    always, the others optionally; no other properties, whether
//    additionalProperties is false, true or absent. An object schema without
//    properties takes any keys: keys of its patternProperties regexes (values
//    that satisfy every pattern's schema), or any keys with values of the
//    additionalProperties schema, or any JSON value. A listed name that a
//    patternProperties regex matches takes both schemas. Required names that
//    are not listed come after the listed ones, with the schema of the
//    patterns they match, else of additionalProperties (refused when false),
//    else any value. minProperties/maxProperties count them (a map's
//    minProperties above 1 is refused: a repeated key would count once);
//    dependencies/dependentRequired make the dependent names required
//    wherever the name may be written; a dependent schema leaves its
//    (optional) name out. An optional property that no value satisfies (an
//    enum without a value of the type) is left out.
//  - arrays: items (any value when absent), minItems/maxItems (longer arrays
//    than kMaxCount are not generated), tuples (items as an array, or
//    prefixItems) with additionalItems/items for the rest; uniqueItems as
//    distinct listed values (enum, const, boolean) in the order of the list,
//    otherwise at most one item (refused when minItems is above 1).
//  - strings: enum, const, pattern (see regex.h and regex_strings.h: an unanchored regex whose
//    automaton would grow past kMaxRegexStates generates the strings that
//    start with a match), minLength/maxLength counted in base 32 with rule
//    calls (string_length.h; bounds above 2^20 count as 2^20), format (see
//    json_formats.h: date, time, date-time, email, hostname, uri,
//    uri-reference, uuid, ipv4, ipv6, regex; formats JSON Schema does not
//    define are annotations). Lengths beside a pattern or format are accepted
//    when every string of it has an allowed length; a maxLength beside a
//    longer pattern bounds its repetitions (regex_strings.h).
//  - integers and numbers with minimum/maximum/exclusiveMinimum/
//    exclusiveMaximum (numbers within bounds are written without exponent and
//    compare within them as doubles too: json_number_range.h), multipleOf
//    (integers: exactly; fractions 1/n such as 0.01: integers, which
//    floating-point validators find whole); booleans; null.
//  - anyOf, oneOf (generated as anyOf: alternatives must not overlap, or be
//    told apart by required names, schema_merge.h), allOf
//    and keywords beside $ref/anyOf/oneOf merged into one schema
//    (schema_merge.h), a "type" array, nullable (OpenAPI), $ref within the
//    document (schema_refs.h: pointers, percent-encoded and escaped, anchors,
//    $id) including recursion through objects or arrays. Refusals inside a
//    merged schema name the pointer of the schema that holds the allOf,
//    followed by /allOf and the merged keyword.
//  - whitespace between the tokens of the document: one run per gap, nothing,
//    one space, or a newline and at most kMaxIndent spaces or tabs
//    (json_lexical.h); none before or after the whole document.
//  - free-form values (json_object, a `true` or `{}` schema, items without a
//    schema): at most kMaxFreeDepth objects and arrays deep, the free-form
//    value itself included, so that a model cannot open object after object
//    until it runs out of tokens.
// Annotations (title, description, default, examples, ...) and unknown
// keywords are ignored, as JSON Schema prescribes. Refused, with a SchemaError
// naming the keyword and where it is: not, if/then/else, propertyNames,
// contains, unevaluated*, $dynamicRef, $recursiveRef, references outside the
// document, and the forms of the keywords above that generation cannot
// guarantee (each error says which).
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "structured/grammar.h"

namespace tandem::structured {

inline constexpr int kMaxCount = 256;    // the largest minItems, counted maxItems, minProperties
inline constexpr int kMaxFreeDepth = 6;  // nesting within a free-form value

// A name as one step of a JSON pointer (RFC 6901: '~' as "~0", '/' as "~1"),
// as SchemaError paths spell them.
std::string json_pointer_token(std::string_view key);

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
