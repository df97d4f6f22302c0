// Reading the fields of a request body: each optional field by its expected
// type, a wrong type refused with a 400 naming the field (ApiError). A field sent
// as null counts as absent (clients generated from OpenAI's schema send nulls
// for unset options).
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/api_error.h"

namespace tandem::server {

inline const char* type_name(const nlohmann::ordered_json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

class Fields {
 public:
  explicit Fields(const nlohmann::ordered_json& body) : body_(body) {}

  const nlohmann::ordered_json* get(const char* name) const {
    auto it = body_.find(name);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<double> number(const char* name) const {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number())
      invalid_request(name, fmt::format("'{}' must be a number, got {}", name, type_name(*v)),
                      "invalid_type");
    const double x = v->get<double>();
    if (!std::isfinite(x))
      invalid_request(name, fmt::format("'{}' must be finite", name), "invalid_value");
    return x;
  }

  std::optional<int64_t> integer(const char* name) const {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number_integer())
      invalid_request(name, fmt::format("'{}' must be an integer, got {}", name, type_name(*v)),
                      "invalid_type");
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
      invalid_request(name, fmt::format("'{}' is out of range", name), "invalid_value");
    return v->get<int64_t>();
  }

  std::optional<bool> boolean(const char* name) const {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean())
      invalid_request(name, fmt::format("'{}' must be a boolean, got {}", name, type_name(*v)),
                      "invalid_type");
    return v->get<bool>();
  }

  std::optional<std::string> string(const char* name) const {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_string())
      invalid_request(name, fmt::format("'{}' must be a string, got {}", name, type_name(*v)),
                      "invalid_type");
    return v->get<std::string>();
  }

 private:
  const nlohmann::ordered_json& body_;
};

}  // namespace tandem::server
