// Errors the HTTP API reports to clients: an HTTP status and OpenAI's error
// object {"error": {"message", "type", "param", "code"}}.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace tandem::server {

struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string type, std::string param = "",
           std::string code = "");
  int status;
  std::string type;   // "invalid_request_error", "not_found_error", "server_error", ...
  std::string param;  // the request field at fault ("" when none)
  std::string code;   // a machine-readable reason ("" when none)
};

// A 400 naming the field at fault.
[[noreturn]] void invalid_request(const std::string& param, const std::string& message,
                                  const std::string& code = "");

// {"error": {...}}; empty param and code become null, as OpenAI sends them.
nlohmann::json error_json(const ApiError& e);
// The error object for a bare HTTP status (unknown route, body too large, ...).
ApiError error_for_status(int status);

}  // namespace tandem::server
