// Who may use the server. With an API key, every /v1/ route (and /metrics,
// unless it is made public) needs "Authorization: Bearer KEY", as OpenAI's API
// does; /health stays open so that load balancers can probe without the key.
// Without a key the server refuses to listen beyond the loopback interface
// unless told it is on purpose (--insecure): a model server on 0.0.0.0 with no
// key is open to anyone who can reach the machine.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_error.h"

namespace tandem::server {

struct AccessOptions {
  // "" = no authentication. Several keys are separated by commas: each is its
  // own tenant, whose requests are never drafted from another key's text
  // (speculative/suffix_drafter.h).
  std::string api_key;
  bool public_metrics = false;  // /metrics without the key
};

class AccessControl {
 public:
  // Throws tandem::Error for a key that cannot travel in an HTTP header
  // (empty after trimming, spaces or control characters).
  explicit AccessControl(AccessOptions options);

  bool enabled() const { return !options_.api_key.empty(); }
  // Whether requests for `path` must present the key.
  bool protects(std::string_view path) const;
  // Whether an Authorization header value ("Bearer KEY", scheme in any case)
  // carries a key. The comparison takes the same time whatever the value.
  bool accepts(std::string_view authorization) const;
  // The tenant of a request (DraftContext::tenant): 1 + the index of the key it
  // carries, 0 when the server has no keys (one shared tenant) or the header
  // carries none of them. Timed as accepts().
  uint64_t tenant(std::string_view authorization) const;
  // The 401 for a protected path requested without the right key, as OpenAI's
  // API answers it (code "invalid_api_key").
  ApiError refusal(std::string_view authorization) const;

 private:
  AccessOptions options_;
  std::vector<std::string> keys_;  // api_key split at its commas
};

// Whether `host` (an address or a name) only reaches this machine: 127.0.0.0/8,
// ::1, an IPv4-mapped loopback address, or a name all of whose addresses are
// loopback ("localhost").
bool is_loopback_host(const std::string& host);

// Throws tandem::Error when the server would listen beyond loopback with no
// API key and without `insecure`; the message says how to proceed.
void check_listen_policy(const std::string& host, bool has_api_key, bool insecure);

}  // namespace tandem::server
