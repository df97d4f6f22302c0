// JSON text from files and requests, parsed with a bound on nesting depth.
// nlohmann::json parses iteratively, but copying, comparing and dumping a value
// recurse once per level: a few kilobytes of "[[[[..." would overflow the stack
// in the code that later handles the value. Real inputs (config.json,
// tokenizer.json, API requests) nest fewer than ten levels.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tandem {

constexpr int kMaxJsonDepth = 64;

// The parsed value, or nullopt with *error set to a one-line reason (nlohmann's
// message without its "[json.exception...]" prefix, or the depth limit).
// Json is nlohmann::json or nlohmann::ordered_json (where the order of an
// object's keys means something, as in a JSON schema's properties).
template <class Json = nlohmann::json>
std::optional<Json> try_parse_json(std::string_view text, std::string* error);
extern template std::optional<nlohmann::json> try_parse_json(std::string_view, std::string*);
extern template std::optional<nlohmann::ordered_json> try_parse_json(std::string_view,
                                                                     std::string*);

// Throws tandem::Error "<source>: invalid JSON: <reason>".
nlohmann::json parse_json(std::string_view text, const std::string& source);

// `v` as JSON text for an error message, cut to max_chars (with "..." after).
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 200);

}  // namespace tandem
