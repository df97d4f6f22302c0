#include "server/auth.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/error.h"

namespace tandem::server {
namespace {

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) !=
        std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

// The token of "Bearer TOKEN", or nullopt for another scheme.
std::optional<std::string_view> bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (!starts_with_ci(authorization, kScheme)) return std::nullopt;
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

// Equal strings, in time that depends on the key's length only (a timing
// difference must not tell a client how many leading characters it got right).
bool same_key(std::string_view key, std::string_view offered) {
  unsigned diff = key.size() == offered.size() ? 0 : 1;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>(key[i]) ^
            static_cast<unsigned char>(i < offered.size() ? offered[i] : 0);
  return diff == 0;
}

bool is_loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace

AccessControl::AccessControl(AccessOptions options) : options_(std::move(options)) {
  const std::string& keys = options_.api_key;
  if (keys.empty()) return;
  for (char c : keys)
    check(c > ' ' && c < 0x7F,
          "the API key must be printable ASCII without spaces (it travels in an HTTP header)");
  for (size_t from = 0; from <= keys.size();) {
    const size_t comma = std::min(keys.find(',', from), keys.size());
    check(comma > from, "the API key list '{}' has an empty key (keys are separated by commas)",
          keys);
    keys_.push_back(keys.substr(from, comma - from));
    from = comma + 1;
  }
}

bool AccessControl::protects(std::string_view path) const {
  if (!enabled()) return false;
  if (path == "/metrics") return !options_.public_metrics;
  return path == "/v1" || path.substr(0, 4) == "/v1/";
}

bool AccessControl::accepts(std::string_view authorization) const {
  return tenant(authorization) != 0;
}

uint64_t AccessControl::tenant(std::string_view authorization) const {
  auto token = bearer_token(authorization);
  if (!token) return 0;
  // Every key is compared, so that the time tells nothing of which one matched.
  uint64_t found = 0;
  for (size_t i = 0; i < keys_.size(); ++i)
    if (same_key(keys_[i], *token)) found = i + 1;
  return found;
}

ApiError AccessControl::refusal(std::string_view authorization) const {
  if (authorization.empty())
    return ApiError(401,
                    "You didn't provide an API key. You need to provide your API key in an "
                    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)",
                    "invalid_request_error", "", "invalid_api_key");
  if (!bearer_token(authorization))
    return ApiError(401, "the Authorization header must use the Bearer scheme (Bearer YOUR_KEY)",
                    "invalid_request_error", "", "invalid_api_key");
  return ApiError(401, "Incorrect API key provided", "invalid_request_error", "",
                  "invalid_api_key");
}

bool is_loopback_host(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) return false;
  bool all = true;
  for (const addrinfo* a = found; a; a = a->ai_next) all = all && is_loopback(a->ai_addr);
  freeaddrinfo(found);
  return all;
}

void check_listen_policy(const std::string& host, bool has_api_key, bool insecure) {
  if (has_api_key || insecure || is_loopback_host(host)) return;
  fail(
      "refusing to listen on {} without an API key: anyone who can reach this machine could "
      "use the server. Set --api-key KEY (or the TANDEM_API_KEY environment variable), listen "
      "on 127.0.0.1, or pass --insecure to serve without a key anyway",
      host);
}

}  // namespace tandem::server
