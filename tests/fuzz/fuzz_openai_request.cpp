// The body of POST /v1/completions and /v1/chat/completions (first input byte:
// bit 0 picks the endpoint). Every body is either parsed or refused with a 4xx
// error object that serializes to valid JSON; a parsed one, built into a Request
// (on a stand-in prompt) and checked (engine/request_check.h), either passes
// with every parameter within the documented limits or is refused naming a field.
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "engine/request_check.h"
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
    if (ep == Endpoint::ChatCompletions)
      FUZZ_CHECK(!r.messages.empty());
    else
      FUZZ_CHECK((r.prompt && !r.prompt->empty()) || !r.prompt_ids.empty());
    Request req;
    req.prompt = {1, 2, 3};
    req.params.max_tokens = r.max_tokens.value_or(16);
    req.params.sampling = r.sampling;
    req.params.stop_strings = r.stop;
    req.params.logprobs = r.logprobs.enabled ? r.logprobs.top : -1;
    RequestLimits limits;
    limits.vocab_size = 1000;
    limits.n_ctx = 4096;
    limits.kv_positions = 1 << 20;
    try {
      check_request(req, limits);
      FUZZ_CHECK(static_cast<int>(req.params.stop_strings.size()) <= kMaxStopStrings);
      for (const auto& s : req.params.stop_strings) FUZZ_CHECK(!s.empty());
      FUZZ_CHECK(req.params.max_tokens >= 1);
      FUZZ_CHECK(req.params.sampling.temperature >= 0);
      FUZZ_CHECK(req.params.sampling.top_p > 0 && req.params.sampling.top_p <= 1);
    } catch (const RequestError& e) {
      FUZZ_CHECK(!e.field.empty() && !e.code.empty());
    }
  } catch (const ApiError& e) {
    FUZZ_CHECK(e.status >= 400 && e.status < 500);
    const std::string text = dump(error_json(e));
    FUZZ_CHECK(nlohmann::json::accept(text));
  }
  return 0;
}
