#include "server/request_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "engine/request_check.h"
#include "model/model.h"
#include "server/api_error.h"
#include "structured/grammar_constraint.h"
#include "structured/json_schema.h"
#include "structured/tool_call_grammar.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {
namespace {

// A seed for a request that sent none, reported in the response so that it can
// be replayed: below 2^63, since OpenAI's seed is a signed integer.
uint64_t random_seed() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  return gen() >> 1;
}

// The token ids a tool-call constraint needs, found once per model.
std::shared_ptr<const structured::ToolCallTokens> find_tool_tokens(
    const ToolCallFormat& format, const Tokenizer& tok, const structured::TokenVocabulary& vocab) {
  int open = -1, close = -1;
  if (!format.open.empty()) {
    auto o = tok.find_piece(format.open), c = tok.find_piece(format.close);
    check(o && c, "the tokenizer has no single tokens for {} and {}", format.open, format.close);
    open = *o;
    close = *c;
  }
  return structured::find_tool_call_tokens(vocab, open, close, format.fence_open);
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
    tool_format_ = tool_call_format(*family_, model.chat_template());
    if (tool_format_) tool_tokens_ = find_tool_tokens(*tool_format_, *model.tokenizer(), *vocab_);
  } catch (const Error& e) {
    chat_error_ = fmt::format("{}: {}", model.path(), e.what());
  }
}

std::shared_ptr<const TokenConstraint> RequestBuilder::tool_constraint(
    const ToolsRequest& t) const {
  std::vector<structured::ToolFunction> functions;
  std::vector<size_t> index;  // functions[k] is tools[index[k]]
  for (size_t i = 0; i < t.tools.size(); ++i)
    if (t.choice.kind != ToolChoice::Kind::Function || t.tools[i].name == t.choice.function) {
      functions.push_back({t.tools[i].name, t.tools[i].parameters});
      index.push_back(i);
    }
  const ToolCallFormat& f = *tool_format_;
  const auto start = t.choice.kind == ToolChoice::Kind::Auto
                         ? structured::ToolCallConstraint::Start::Free
                         : structured::ToolCallConstraint::Start::Call;
  // The ways a call may open (tool_call_constraint.h): between markers where the
  // format has them, and where the model may answer in text, also as bare JSON
  // from the first token and after a fence.
  structured::ToolCallGrammars g;
  const bool free = start == structured::ToolCallConstraint::Start::Free;
  const std::string_view key = f.arguments_key;
  size_t bad = 0;
  try {
    if (!f.open.empty())
      g.marked = structured::tool_call_grammar(functions, key, f.body_prefix, f.body_suffix, &bad);
    if (f.open.empty() || free)
      g.bare = structured::tool_call_grammar(functions, key, f.bare_prefix, f.bare_suffix, &bad);
    if (free && !f.fence_open.empty())
      g.fenced = structured::tool_call_grammar(functions, key, "", f.fence_close, &bad);
  } catch (const structured::SchemaError& e) {
    invalid_request("tools", fmt::format("tools[{}].function.parameters: {}", index[bad], e.what()),
                    "unsupported_schema");
  }
  return structured::ToolCallConstraint::start(g, vocab_, tool_tokens_, start, t.parallel);
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
    std::vector<std::string> tools;
    for (const ToolDefinition& t : p.tools.tools) tools.push_back(t.definition);
    if (!tools.empty() && !tool_format_)
      invalid_request("tools",
                      fmt::format("the model {} cannot call tools: its chat template ({}) has no "
                                  "tool-call format",
                                  model_.path(), chat_family()),
                      "tools_unsupported");
    std::string rendered;
    try {
      rendered = render_chat(*family_, model_.chat_template(), p.messages, true, tools);
    } catch (const Error& e) {
      invalid_request("messages", e.what(), "invalid_value");
    }
    // The rendered text carries the template's own BOS and special tokens.
    return model_.tokenizer()->encode(rendered, false, true);
  }
  if (!p.prompt) return p.prompt_ids;  // their range is checked with the rest
  const Tokenizer* tok = model_.tokenizer();
  if (!tok)
    invalid_request("prompt", "the model has no tokenizer: send the prompt as token ids",
                    "invalid_value");
  // Control-token text in a completion prompt stays text, as in llama.cpp's server.
  return tok->encode(*p.prompt, tok->add_bos(), false);
}

Request RequestBuilder::build(const ParsedRequest& p, uint64_t tenant) const {
  Request r;
  r.prompt = prompt_tokens(p);
  const bool chat = p.endpoint == Endpoint::ChatCompletions;
  RequestLimits limits;
  limits.vocab_size = model_.config().vocab_size;
  limits.n_ctx = limits_.n_ctx;
  limits.kv_positions = limits_.kv_positions;
  limits.max_prompt_tokens = limits_.max_prompt_tokens;
  limits.prompt_field = chat ? "messages" : "prompt";
  limits.logprobs_field = chat ? "top_logprobs" : "logprobs";
  limits.max_top_logprobs = chat ? kMaxChatTopLogprobs : kMaxCompletionLogprobs;
  // Without max_tokens: completions default to OpenAI's 16, chat to the rest of
  // the context (whichever of context and KV cache is smaller).
  const int64_t room = std::min<int64_t>(limits_.n_ctx, limits_.kv_positions) -
                       static_cast<int64_t>(r.prompt.size());
  r.params.max_tokens =
      p.max_tokens ? *p.max_tokens
      : chat       ? static_cast<int>(std::max<int64_t>(room, 0))
                   : static_cast<int>(std::clamp<int64_t>(room, 0, kDefaultCompletionMaxTokens));
  r.params.sampling = p.sampling;
  r.params.sampling.seed = p.seed ? *p.seed : random_seed();
  r.params.sampling.mode = p.sampling_mode.value_or(defaults_.sampling_mode);
  r.params.stop_strings = p.stop;
  r.params.ignore_eos = p.ignore_eos;
  r.params.speculate = p.speculate;
  r.params.tenant = tenant;
  r.params.logprobs = p.logprobs.enabled ? p.logprobs.top : -1;
  if (p.response_format.grammar) {
    if (!vocab_)
      invalid_request("response_format",
                      "structured outputs need the model's tokenizer, and this model has none",
                      "unsupported_value");
    r.params.constraint = structured::GrammarConstraint::start(p.response_format.grammar, vocab_);
  }
  if (p.tools.calls_possible()) {
    r.params.constraint = tool_constraint(p.tools);
    if (tool_tokens_->open >= 0)
      r.params.text_special_tokens = {tool_tokens_->open, tool_tokens_->close};
  }
  try {
    check_request(r, limits);
  } catch (const RequestError& e) {
    invalid_request(e.field, fmt::format("{}", e.what()), e.code);
  }
  return r;
}

}  // namespace tandem::server
