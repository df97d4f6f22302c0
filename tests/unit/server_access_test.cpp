// The API key check and the listening policy of tandem serve (src/server/auth.h).
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/auth.h"

using namespace tandem;
using namespace tandem::server;

namespace {

AccessControl with_key(const std::string& key, bool public_metrics = false) {
  return AccessControl(AccessOptions{key, public_metrics});
}

}  // namespace

TEST(ServerAccess, WithoutAKeyNothingIsProtected) {
  const AccessControl open = with_key("");
  EXPECT_FALSE(open.enabled());
  for (const char* path : {"/v1/completions", "/v1/models", "/metrics", "/health", "/"})
    EXPECT_FALSE(open.protects(path)) << path;
}

TEST(ServerAccess, TheKeyGuardsV1AndMetricsNotHealth) {
  const AccessControl a = with_key("tk-123");
  EXPECT_TRUE(a.enabled());
  for (const char* path :
       {"/v1/completions", "/v1/chat/completions", "/v1/models", "/v1/models/x", "/v1", "/metrics"})
    EXPECT_TRUE(a.protects(path)) << path;
  for (const char* path : {"/health", "/", "/v10/x", "/v1x"})
    EXPECT_FALSE(a.protects(path)) << path;
  EXPECT_FALSE(with_key("tk-123", true).protects("/metrics"));
  EXPECT_TRUE(with_key("tk-123", true).protects("/v1/models"));
}

TEST(ServerAccess, OnlyTheExactBearerKeyIsAccepted) {
  const AccessControl a = with_key("tk-123");
  EXPECT_TRUE(a.accepts("Bearer tk-123"));
  EXPECT_TRUE(a.accepts("bearer tk-123"));  // the scheme is case-insensitive (RFC 7235)
  EXPECT_TRUE(a.accepts("BEARER   tk-123  "));
  for (const char* bad : {"", "tk-123", "Bearer", "Bearer ", "Bearer tk-12", "Bearer tk-1234",
                          "Bearer TK-123", "Basic tk-123", "Bearertk-123", "Bearer tk-123 x"})
    EXPECT_FALSE(a.accepts(bad)) << bad;
}

TEST(ServerAccess, RefusalsAreOpenAIStyle401s) {
  const AccessControl a = with_key("tk-123");
  for (const char* header : {"", "Basic abc", "Bearer wrong"}) {
    const ApiError e = a.refusal(header);
    EXPECT_EQ(e.status, 401) << header;
    EXPECT_EQ(e.code, "invalid_api_key") << header;
    EXPECT_EQ(e.type, "invalid_request_error") << header;
    // The refusal never echoes what the client sent.
    if (*header) {
      EXPECT_EQ(std::string(e.what()).find(header), std::string::npos) << e.what();
    }
  }
}

TEST(ServerAccess, KeysThatCannotTravelInAHeaderAreRefused) {
  for (const char* bad : {"has space", "tab\tkey", "new\nline", "\x7f", "caf\xc3\xa9"})
    EXPECT_THROW(with_key(bad), Error) << bad;
  EXPECT_NO_THROW(with_key("sk-Az09_-.~+/="));
}

// Several keys, separated by commas: each its own tenant, whose requests are
// drafted only from its own requests' text (speculative/suffix_drafter.h).
TEST(ServerAccess, EachKeyIsItsOwnTenant) {
  const AccessControl a = with_key("tk-a,tk-b,tk-c");
  EXPECT_EQ(a.tenant("Bearer tk-a"), 1u);
  EXPECT_EQ(a.tenant("Bearer tk-b"), 2u);
  EXPECT_EQ(a.tenant("bearer tk-c "), 3u);
  for (const char* bad : {"", "Bearer tk-a,tk-b", "Bearer tk-d", "Bearer tk-", "Basic tk-a"}) {
    EXPECT_EQ(a.tenant(bad), 0u) << bad;
    EXPECT_FALSE(a.accepts(bad)) << bad;
  }
  EXPECT_TRUE(a.accepts("Bearer tk-b"));
  // Without keys every request is the one shared tenant.
  EXPECT_EQ(with_key("").tenant("Bearer anything"), 0u);
  for (const char* bad : {"tk-a,", ",tk-a", "tk-a,,tk-b", ","})
    EXPECT_THROW(with_key(bad), Error) << bad;
}

TEST(ServerListenPolicy, LoopbackAddressesAndNames) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "localhost"})
    EXPECT_TRUE(is_loopback_host(host)) << host;
  for (const char* host :
       {"0.0.0.0", "::", "10.0.0.1", "192.168.1.1", "::ffff:10.0.0.1", "", "no-such-host.invalid"})
    EXPECT_FALSE(is_loopback_host(host)) << host;
}

TEST(ServerListenPolicy, NonLoopbackNeedsAKeyOrInsecure) {
  EXPECT_NO_THROW(check_listen_policy("127.0.0.1", false, false));
  EXPECT_NO_THROW(check_listen_policy("0.0.0.0", true, false));
  EXPECT_NO_THROW(check_listen_policy("0.0.0.0", false, true));
  try {
    check_listen_policy("0.0.0.0", false, false);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* word : {"0.0.0.0", "--api-key", "TANDEM_API_KEY", "--insecure"})
      EXPECT_NE(what.find(word), std::string::npos) << what;
  }
}
