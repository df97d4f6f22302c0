#include "engine/request_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tandem {
namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& message,
                         const std::string& code = "invalid_value") {
  throw RequestError(field, message, code);
}

void check_prompt(const Request& r, const RequestLimits& l) {
  const int n_prompt = static_cast<int>(r.prompt.size());
  const std::string& field = l.prompt_field;
  if (n_prompt == 0) refuse(field, "the prompt is empty", "empty_prompt");
  for (int id : r.prompt)
    if (id < 0 || id >= l.vocab_size)
      refuse(field,
             fmt::format("prompt token id {} is outside the vocabulary [0, {})", id, l.vocab_size));
  if (l.max_prompt_tokens > 0 && n_prompt > l.max_prompt_tokens)
    refuse(field,
           fmt::format("the prompt has {} tokens; this server accepts at most {}", n_prompt,
                       l.max_prompt_tokens),
           "prompt_too_long");
}

// A request must fit both one context and the whole KV cache.
void check_room(const Request& r, const RequestLimits& l) {
  const int n_prompt = static_cast<int>(r.prompt.size());
  const int64_t limit = std::min<int64_t>(l.n_ctx, l.kv_positions);
  const char* limit_name = l.n_ctx <= l.kv_positions ? "maximum context length" : "KV cache size";
  if (n_prompt >= limit)
    refuse(l.prompt_field,
           fmt::format("the {} is {} tokens, but the prompt has {} tokens (no room to generate "
                       "any)",
                       limit_name, limit, n_prompt),
           "context_length_exceeded");
  const int max_tokens = r.params.max_tokens;
  if (max_tokens < 1)
    refuse("max_tokens", fmt::format("'max_tokens' must be >= 1, got {}", max_tokens));
  if (n_prompt + int64_t{max_tokens} > limit)
    refuse("max_tokens",
           fmt::format("the {} is {} tokens, but {} were requested ({} in the prompt, {} for the "
                       "completion); reduce the prompt or max_tokens",
                       limit_name, limit, n_prompt + int64_t{max_tokens}, n_prompt, max_tokens),
           "context_length_exceeded");
}

void check_output_options(const Request& r, const RequestLimits& l) {
  const GenerationParams& p = r.params;
  if (p.logprobs < -1 || p.logprobs > l.max_top_logprobs)
    refuse(l.logprobs_field, fmt::format("'{}' must be in [0, {}], got {}", l.logprobs_field,
                                         l.max_top_logprobs, p.logprobs));
  if (static_cast<int>(p.stop_strings.size()) > kMaxStopStrings)
    refuse("stop",
           fmt::format("at most {} stop strings, got {}", kMaxStopStrings, p.stop_strings.size()));
  for (const auto& s : p.stop_strings) {
    if (s.empty()) refuse("stop", "stop strings must not be empty");
    if (s.size() > kMaxStopStringBytes)
      refuse("stop", fmt::format("stop strings must be at most {} bytes, got one of {}",
                                 kMaxStopStringBytes, s.size()));
  }
  // A constrained document ends at an end-of-generation token, which ignore_eos
  // would write into the output instead.
  if (p.ignore_eos && p.constraint)
    refuse("ignore_eos", "ignore_eos cannot be combined with a response_format");
}

}  // namespace

void check_sampling(const SamplingParams& s) {
  if (!(std::isfinite(s.temperature) && s.temperature >= 0.0f))
    refuse("temperature", fmt::format("'temperature' must be >= 0, got {}", s.temperature));
  if (!(std::isfinite(s.top_p) && s.top_p > 0.0f && s.top_p <= 1.0f))
    refuse("top_p", fmt::format("'top_p' must be in (0, 1], got {}", s.top_p));
  if (s.top_k < 0) refuse("top_k", fmt::format("'top_k' must be >= 0, got {}", s.top_k));
  if (!(std::isfinite(s.min_p) && s.min_p >= 0.0f && s.min_p <= 1.0f))
    refuse("min_p", fmt::format("'min_p' must be in [0, 1], got {}", s.min_p));
  if (!(std::isfinite(s.repetition_penalty) && s.repetition_penalty > 0.0f))
    refuse("repetition_penalty",
           fmt::format("'repetition_penalty' must be > 0, got {}", s.repetition_penalty));
  if (s.penalty_last_n < -1)
    refuse("repeat_last_n", fmt::format("'repeat_last_n' must be >= -1, got {}", s.penalty_last_n));
}

void check_request(const Request& r, const RequestLimits& l) {
  // The parameters themselves first, then whether the request fits: a request
  // with a bad parameter hears of that rather than of a limit it also meets.
  check_prompt(r, l);
  check_sampling(r.params.sampling);
  check_output_options(r, l);
  check_room(r, l);
}

}  // namespace tandem
