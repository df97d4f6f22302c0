#include "server/api_error.h"

namespace tandem::server {

ApiError::ApiError(int status, std::string message, std::string type, std::string param,
                   std::string code)
    : std::runtime_error(std::move(message)),
      status(status),
      type(std::move(type)),
      param(std::move(param)),
      code(std::move(code)) {}

void invalid_request(const std::string& param, const std::string& message,
                     const std::string& code) {
  throw ApiError(400, message, "invalid_request_error", param, code);
}

nlohmann::json error_json(const ApiError& e) {
  auto or_null = [](const std::string& s) {
    return s.empty() ? nlohmann::json() : nlohmann::json(s);
  };
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", or_null(e.param)},
            {"code", or_null(e.code)}}}};
}

ApiError error_for_status(int status) {
  switch (status) {
    case 400:
      return ApiError(400, "malformed HTTP request", "invalid_request_error");
    case 404:
      return ApiError(404,
                      "no such endpoint (try POST /v1/completions, POST "
                      "/v1/chat/completions, GET /v1/models, GET /health, GET /metrics)",
                      "not_found_error", "", "unknown_url");
    case 405:
      return ApiError(405, "method not allowed for this endpoint", "invalid_request_error");
    case 413:
      return ApiError(413, "request body too large", "invalid_request_error", "",
                      "request_too_large");
    case 414:
      return ApiError(414, "request URI too long", "invalid_request_error");
    default:
      if (status >= 500) return ApiError(status, "internal server error", "server_error");
      return ApiError(status, "request failed", "invalid_request_error");
  }
}

}  // namespace tandem::server
