#include "server/openai_response.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <random>

#include "tokenizer/tokenizer.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;

bool is_chat(const ResponseMeta& m) { return m.endpoint == Endpoint::ChatCompletions; }

json chunk_base(const ResponseMeta& meta, bool include_usage) {
  json j = {{"id", meta.id},
            {"object", is_chat(meta) ? "chat.completion.chunk" : "text_completion"},
            {"created", meta.created},
            {"model", meta.model}};
  // With include_usage every chunk but the last carries "usage": null (OpenAI's shape).
  if (include_usage) j["usage"] = nullptr;
  return j;
}

json chunk_choice(const ResponseMeta& meta, json delta_or_text, json finish_reason,
                  json logprobs = nullptr) {
  json c = {{"index", 0}};
  if (is_chat(meta))
    c["delta"] = std::move(delta_or_text);
  else
    c["text"] = std::move(delta_or_text);
  c["logprobs"] = std::move(logprobs);
  c["finish_reason"] = std::move(finish_reason);
  return c;
}

// A token as the API spells it: its bytes as text (an incomplete UTF-8
// character shows as U+FFFD when dumped), and the bytes themselves.
std::string token_text(const ResponseMeta& meta, int id) {
  return meta.tokenizer ? meta.tokenizer->token_bytes(id) : std::to_string(id);
}
json token_bytes_json(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(c);
  return bytes;
}
json chat_token_json(const ResponseMeta& meta, const TokenLogprob& t) {
  const std::string text = token_text(meta, t.token);
  return {{"token", text}, {"logprob", t.logprob}, {"bytes", token_bytes_json(text)}};
}

// OpenAI's id of a call: unique within the response, and across responses by its id.
std::string call_id(const ResponseMeta& meta, size_t index) {
  const size_t dash = meta.id.find('-');
  return fmt::format("call_{}_{}", meta.id.substr(dash == std::string::npos ? 0 : dash + 1), index);
}

// A finished request that stopped after complete calls reports "tool_calls".
json finish_reason_json(const RequestResult& r, bool called_tools) {
  if (called_tools && r.finish_reason == FinishReason::Stop) return "tool_calls";
  return finish_reason_name(r.finish_reason);
}

json tool_calls_message(const ResponseMeta& meta, const RequestResult& r, bool* called) {
  const ToolCallOutput out = read_tool_calls(*meta.tool_format, r.text);
  json calls = json::array();
  for (size_t k = 0; k < out.calls.size(); ++k) {
    const OutputToolCall& c = out.calls[k];
    if (!c.complete) break;  // cut short by max_tokens: not a call
    calls.push_back({{"id", call_id(meta, k)},
                     {"type", "function"},
                     {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  *called = !calls.empty();
  json msg = {{"role", "assistant"}};
  if (*called) {
    const bool blank = out.content.find_first_not_of(" \n\r\t") == std::string::npos;
    msg["content"] = blank ? json(nullptr) : json(out.content);
    msg["tool_calls"] = std::move(calls);
  } else {
    msg["content"] = r.text;  // no complete call: the text as written
  }
  return msg;
}

}  // namespace

json logprobs_json(const ResponseMeta& meta, const std::vector<const TokenLogprobs*>& logprobs,
                   size_t* text_offset) {
  if (is_chat(meta)) {
    json content = json::array();
    for (const TokenLogprobs* lp : logprobs) {
      json entry = chat_token_json(meta, lp->chosen);
      entry["top_logprobs"] = json::array();
      for (const TokenLogprob& t : lp->top)
        entry["top_logprobs"].push_back(chat_token_json(meta, t));
      content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprobs* lp : logprobs) {
    const std::string text = token_text(meta, lp->chosen.token);
    tokens.push_back(text);
    token_logprobs.push_back(lp->chosen.logprob);
    json alternatives = json::object();
    for (const TokenLogprob& t : lp->top) alternatives[token_text(meta, t.token)] = t.logprob;
    top.push_back(std::move(alternatives));
    offsets.push_back(*text_offset);
    *text_offset += text.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

ResponseMeta make_meta(Endpoint endpoint, const std::string& model) {
  // Unique within the process and unlikely to repeat across restarts.
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  ResponseMeta m;
  m.endpoint = endpoint;
  m.id = fmt::format("{}-{:08x}{:08x}", endpoint == Endpoint::ChatCompletions ? "chatcmpl" : "cmpl",
                     static_cast<uint32_t>(salt), static_cast<uint32_t>(counter++));
  m.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  m.model = model;
  return m;
}

json usage_json(const RequestResult& r) {
  const int completion = static_cast<int>(r.tokens.size());
  return {{"prompt_tokens", r.stats.n_prompt},
          {"completion_tokens", completion},
          {"total_tokens", r.stats.n_prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", r.stats.n_cached_prompt}}}};
}

json tandem_stats_json(const ResponseMeta& meta, const RequestStats& s) {
  return {{"seed", meta.seed},
          {"sampling_mode", meta.sampling_mode},
          {"acceptance_rate", s.acceptance_rate()},
          {"drafted", s.drafted},
          {"accepted", s.accepted},
          {"tokens_per_round", s.tokens_per_round()},
          {"rounds", s.rounds},
          {"spec_rounds", s.spec_rounds},
          {"prefill_ms", s.prefill_ms},
          {"decode_ms", s.decode_ms},
          {"decode_tok_per_s", s.decode_tok_per_s()}};
}

json completion_json(const ResponseMeta& meta, const RequestResult& r) {
  json choice = {{"index", 0}};
  bool called = false;
  if (is_chat(meta) && meta.tool_format)
    choice["message"] = tool_calls_message(meta, r, &called);
  else if (is_chat(meta))
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  else
    choice["text"] = r.text;
  choice["logprobs"] = nullptr;
  if (meta.logprobs) {
    std::vector<const TokenLogprobs*> lp;
    for (const TokenLogprobs& t : r.logprobs) lp.push_back(&t);
    size_t offset = 0;
    choice["logprobs"] = logprobs_json(meta, lp, &offset);
  }
  choice["finish_reason"] = finish_reason_json(r, called);
  return {{"id", meta.id},
          {"object", is_chat(meta) ? "chat.completion" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", json::array({choice})},
          {"usage", usage_json(r)},
          {"tandem", tandem_stats_json(meta, r.stats)}};
}

json role_chunk(const ResponseMeta& meta, bool include_usage) {
  json j = chunk_base(meta, include_usage);
  j["choices"] =
      json::array({chunk_choice(meta, {{"role", "assistant"}, {"content", ""}}, nullptr)});
  return j;
}

json text_chunk(const ResponseMeta& meta, const RequestChannel::News& news, bool include_usage,
                size_t* text_offset, ToolCallStream* calls) {
  json j = chunk_base(meta, include_usage);
  json body = is_chat(meta) ? json{{"content", news.text}} : json(news.text);
  if (calls) {
    const ToolCallStream::Delta d = calls->push(news.text);
    body = {{"content", d.content}};
    if (!d.calls.empty()) {
      json list = json::array();
      for (const auto& c : d.calls) {
        json e = {{"index", c.index}, {"function", {{"arguments", c.arguments}}}};
        if (c.start) {
          e["id"] = call_id(meta, c.index);
          e["type"] = "function";
          e["function"]["name"] = c.name;
        }
        list.push_back(std::move(e));
      }
      body["tool_calls"] = std::move(list);
      if (d.content.empty()) body["content"] = nullptr;
    }
  }
  json logprobs = nullptr;
  if (meta.logprobs) {
    std::vector<const TokenLogprobs*> lp;
    for (const StreamedToken& t : news.tokens)
      if (t.logprobs) lp.push_back(&*t.logprobs);
    logprobs = logprobs_json(meta, lp, text_offset);
  }
  j["choices"] = json::array({chunk_choice(meta, std::move(body), nullptr, std::move(logprobs))});
  json tokens = json::array();
  for (const StreamedToken& t : news.tokens)
    tokens.push_back({{"text", t.text}, {"draft", t.drafted}});
  j["tandem"] = {
      {"tokens", std::move(tokens)}, {"drafted", news.drafted}, {"accepted", news.accepted}};
  return j;
}

json content_chunk(const ResponseMeta& meta, const std::string& text, bool include_usage) {
  json j = chunk_base(meta, include_usage);
  j["choices"] = json::array({chunk_choice(meta, {{"content", text}}, nullptr)});
  return j;
}

json finish_chunk(const ResponseMeta& meta, const RequestResult& r, bool include_usage,
                  bool called_tools) {
  json j = chunk_base(meta, include_usage);
  json body = is_chat(meta) ? json::object() : json("");
  j["choices"] =
      json::array({chunk_choice(meta, std::move(body), finish_reason_json(r, called_tools))});
  j["tandem"] = tandem_stats_json(meta, r.stats);
  return j;
}

json usage_chunk(const ResponseMeta& meta, const RequestResult& r) {
  json j = chunk_base(meta, false);
  j["choices"] = json::array();
  j["usage"] = usage_json(r);
  j["tandem"] = tandem_stats_json(meta, r.stats);
  return j;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace tandem::server
