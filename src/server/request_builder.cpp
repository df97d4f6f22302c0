#include "server/request_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "model/model.h"
#include "server/api_error.h"
#include "structured/grammar_constraint.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {
namespace {

// A seed for a request that sent none, reported in the response so that it can
// be replayed: below 2^63, since OpenAI's seed is a signed integer.
uint64_t random_seed() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  return gen() >> 1;
}

}  // namespace

RequestBuilder::RequestBuilder(const Model& model, ServingLimits limits, RequestDefaults defaults)
    : model_(model), limits_(limits), defaults_(defaults) {
  if (!model.tokenizer()) {
    chat_error_ = fmt::format("{}: the model has no tokenizer", model.path());
    return;
  }
  vocab_ =
      structured::TokenVocabulary::from_tokenizer(*model.tokenizer(), model.config().vocab_size);
  try {
    family_ = detect_chat_template(model.chat_template());
  } catch (const Error& e) {
    chat_error_ = fmt::format("{}: {}", model.path(), e.what());
  }
}

std::string RequestBuilder::chat_family() const {
  return family_ ? chat_family_name(*family_) : "none";
}

std::vector<int> RequestBuilder::prompt_tokens(const ParsedRequest& p) const {
  if (p.endpoint == Endpoint::ChatCompletions) {
    if (!family_)
      throw ApiError(
          400, fmt::format("chat completions are unavailable for this model: {}", chat_error_),
          "invalid_request_error", "messages", "chat_template_unsupported");
    std::string rendered;
    try {
      rendered = render_chat(*family_, model_.chat_template(), p.messages, true);
    } catch (const Error& e) {
      invalid_request("messages", e.what(), "invalid_value");
    }
    // The rendered text carries the template's own BOS and special tokens.
    return model_.tokenizer()->encode(rendered, false, true);
  }
  if (!p.prompt) {
    const int vocab = model_.config().vocab_size;
    for (int id : p.prompt_ids)
      if (id >= vocab)
        invalid_request("prompt",
                        fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab),
                        "invalid_value");
    return p.prompt_ids;
  }
  const Tokenizer* tok = model_.tokenizer();
  if (!tok)
    invalid_request("prompt", "the model has no tokenizer: send the prompt as token ids",
                    "invalid_value");
  // Control-token text in a completion prompt stays text, as in llama.cpp's server.
  return tok->encode(*p.prompt, tok->add_bos(), false);
}

Request RequestBuilder::build(const ParsedRequest& p) const {
  Request r;
  r.prompt = prompt_tokens(p);
  const int n_prompt = static_cast<int>(r.prompt.size());
  const char* prompt_field = p.endpoint == Endpoint::ChatCompletions ? "messages" : "prompt";
  if (n_prompt == 0) invalid_request(prompt_field, "the prompt is empty", "empty_prompt");
  if (limits_.max_prompt_tokens > 0 && n_prompt > limits_.max_prompt_tokens)
    invalid_request(prompt_field,
                    fmt::format("the prompt has {} tokens; this server accepts at most {}",
                                n_prompt, limits_.max_prompt_tokens),
                    "prompt_too_long");
  // A request must fit both one context and the whole KV cache.
  const int64_t limit = std::min<int64_t>(limits_.n_ctx, limits_.kv_positions);
  const char* limit_name =
      limits_.n_ctx <= limits_.kv_positions ? "maximum context length" : "KV cache size";
  if (n_prompt >= limit)
    invalid_request(prompt_field,
                    fmt::format("the server's {} is {} tokens, but the prompt has {} tokens "
                                "(no room to generate any)",
                                limit_name, limit, n_prompt),
                    "context_length_exceeded");
  int max_tokens;
  if (p.max_tokens) {
    max_tokens = *p.max_tokens;
    if (n_prompt + int64_t{max_tokens} > limit)
      invalid_request(
          "max_tokens",
          fmt::format("the server's {} is {} tokens, but {} were requested ({} in "
                      "the prompt, {} for the completion); reduce the prompt or "
                      "max_tokens",
                      limit_name, limit, n_prompt + int64_t{max_tokens}, n_prompt, max_tokens),
          "context_length_exceeded");
  } else if (p.endpoint == Endpoint::Completions) {
    max_tokens = static_cast<int>(std::min<int64_t>(kDefaultCompletionMaxTokens, limit - n_prompt));
  } else {
    max_tokens = static_cast<int>(limit - n_prompt);
  }
  r.params.max_tokens = max_tokens;
  r.params.sampling = p.sampling;
  r.params.sampling.seed = p.seed ? *p.seed : random_seed();
  r.params.sampling.mode = p.sampling_mode.value_or(defaults_.sampling_mode);
  r.params.stop_strings = p.stop;
  r.params.ignore_eos = p.ignore_eos;
  r.params.speculate = p.speculate;
  r.params.logprobs = p.logprobs.enabled ? p.logprobs.top : -1;
  if (p.response_format.grammar) {
    if (!vocab_)
      invalid_request("response_format",
                      "structured outputs need the model's tokenizer, and this model has none",
                      "unsupported_value");
    // The document ends at an end-of-generation token, which ignore_eos would
    // write into the output instead.
    if (p.ignore_eos)
      invalid_request("ignore_eos", "ignore_eos cannot be combined with a response_format",
                      "invalid_value");
    r.params.constraint = structured::GrammarConstraint::start(p.response_format.grammar, vocab_);
  }
  try {
    r.params.sampling.validate();
  } catch (const Error& e) {
    invalid_request("", e.what(), "invalid_value");
  }
  return r;
}

}  // namespace tandem::server
