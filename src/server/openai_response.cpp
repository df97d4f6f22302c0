#include "server/openai_response.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <random>

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

json chunk_choice(const ResponseMeta& meta, json delta_or_text, json finish_reason) {
  json c = {{"index", 0}};
  if (is_chat(meta))
    c["delta"] = std::move(delta_or_text);
  else
    c["text"] = std::move(delta_or_text);
  c["logprobs"] = nullptr;
  c["finish_reason"] = std::move(finish_reason);
  return c;
}

}  // namespace

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
          {"total_tokens", r.stats.n_prompt + completion}};
}

json tandem_stats_json(const RequestStats& s) {
  // The first generated token comes from the prefill; decoding produced the rest.
  const int decoded = s.n_generated > 0 ? s.n_generated - 1 : 0;
  return {{"acceptance_rate", s.acceptance_rate()},
          {"drafted", s.drafted},
          {"accepted", s.accepted},
          {"tokens_per_round", s.tokens_per_round()},
          {"rounds", s.rounds},
          {"spec_rounds", s.spec_rounds},
          {"prefill_ms", s.prefill_ms},
          {"decode_ms", s.decode_ms},
          {"decode_tok_per_s", s.decode_ms > 0 ? decoded * 1000.0 / s.decode_ms : 0.0}};
}

json completion_json(const ResponseMeta& meta, const RequestResult& r) {
  json choice = {{"index", 0}};
  if (is_chat(meta))
    choice["message"] = {{"role", "assistant"}, {"content", r.text}};
  else
    choice["text"] = r.text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = r.finish_reason;
  return {{"id", meta.id},
          {"object", is_chat(meta) ? "chat.completion" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", json::array({choice})},
          {"usage", usage_json(r)},
          {"tandem", tandem_stats_json(r.stats)}};
}

json role_chunk(const ResponseMeta& meta, bool include_usage) {
  json j = chunk_base(meta, include_usage);
  j["choices"] =
      json::array({chunk_choice(meta, {{"role", "assistant"}, {"content", ""}}, nullptr)});
  return j;
}

json text_chunk(const ResponseMeta& meta, const std::string& text, bool include_usage) {
  json j = chunk_base(meta, include_usage);
  json body = is_chat(meta) ? json{{"content", text}} : json(text);
  j["choices"] = json::array({chunk_choice(meta, std::move(body), nullptr)});
  return j;
}

json finish_chunk(const ResponseMeta& meta, const RequestResult& r, bool include_usage) {
  json j = chunk_base(meta, include_usage);
  json body = is_chat(meta) ? json::object() : json("");
  j["choices"] = json::array({chunk_choice(meta, std::move(body), r.finish_reason)});
  j["tandem"] = tandem_stats_json(r.stats);
  return j;
}

json usage_chunk(const ResponseMeta& meta, const RequestResult& r) {
  json j = chunk_base(meta, false);
  j["choices"] = json::array();
  j["usage"] = usage_json(r);
  j["tandem"] = tandem_stats_json(r.stats);
  return j;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace tandem::server
