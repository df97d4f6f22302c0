// The body of POST /v1/completions and /v1/chat/completions (first input byte:
// bit 0 picks the endpoint). Every body is either parsed into a request that
// respects the documented limits or refused with a 4xx error object that
// serializes to valid JSON.
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

using namespace tandem;
using namespace tandem::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Endpoint ep = data[0] & 1 ? Endpoint::ChatCompletions : Endpoint::Completions;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    ParsedRequest r = parse_request(body, ep);
    FUZZ_CHECK(static_cast<int>(r.stop.size()) <= kMaxStopStrings);
    for (const auto& s : r.stop) FUZZ_CHECK(!s.empty());
    FUZZ_CHECK(!r.max_tokens || *r.max_tokens >= 1);
    if (ep == Endpoint::ChatCompletions)
      FUZZ_CHECK(!r.messages.empty());
    else
      FUZZ_CHECK((r.prompt && !r.prompt->empty()) || !r.prompt_ids.empty());
    FUZZ_CHECK(r.sampling.temperature >= 0);
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status >= 400 && e.status < 500);
    const std::string text = dump(error_json(e));
    FUZZ_CHECK(nlohmann::json::accept(text));
  }
  return 0;
}
