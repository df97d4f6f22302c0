#include "server/chat_stream_client.h"

#include <httplib.h>

#include "core/error.h"

namespace tandem::server {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string normalise_base(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (url.size() >= 3 && url.compare(url.size() - 3, 3, "/v1") == 0) url.resize(url.size() - 3);
  check(url.rfind("http://", 0) == 0,
        "'{}': the server's URL must start with http:// (https is not supported)", url);
  return url;
}

// Reads one SSE "data:" payload of a chat completion stream into `out`.
void read_chunk(const nlohmann::json& chunk, double at_ms, StreamedChat& out) {
  if (chunk.contains("usage") && chunk["usage"].is_object()) {
    const auto& u = chunk["usage"];
    out.prompt_tokens = u.value("prompt_tokens", -1);
    out.completion_tokens = u.value("completion_tokens", -1);
    if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
      out.cached_tokens = u["prompt_tokens_details"].value("cached_tokens", -1);
  }
  if (!chunk.contains("choices") || !chunk["choices"].is_array()) return;
  for (const auto& choice : chunk["choices"]) {
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
      out.finish_reason = choice["finish_reason"].get<std::string>();
      if (out.ttft_ms < 0) out.ttft_ms = at_ms;
    }
    if (!choice.contains("delta") || !choice["delta"].is_object()) continue;
    const auto& delta = choice["delta"];
    bool produced = false;
    if (delta.contains("content") && delta["content"].is_string()) {
      const std::string piece = delta["content"].get<std::string>();
      out.content += piece;
      produced = !piece.empty();
    }
    if (delta.contains("tool_calls") && delta["tool_calls"].is_array()) {
      for (const auto& call : delta["tool_calls"])
        out.tool_calls = std::max(out.tool_calls, call.value("index", 0) + 1);
      produced = produced || !delta["tool_calls"].empty();
    }
    if (!produced) continue;
    if (out.ttft_ms < 0) out.ttft_ms = at_ms;
    out.last_delta_ms = at_ms;
    ++out.deltas;
  }
}

}  // namespace

double StreamedChat::decode_tokens_per_s() const {
  const double ms = decode_ms();
  if (completion_tokens < 2 || ms <= 0) return 0;
  return (completion_tokens - 1) / (ms / 1000.0);
}

ChatStreamClient::ChatStreamClient(const std::string& base_url, std::string api_key,
                                   double timeout_s)
    : base_(normalise_base(base_url)), api_key_(std::move(api_key)), timeout_s_(timeout_s) {}

bool ChatStreamClient::healthy() const {
  httplib::Client cli(base_);
  cli.set_connection_timeout(2);
  auto res = cli.Get("/health");
  return res && res->status == 200;
}

StreamedChat ChatStreamClient::chat(nlohmann::json body) const {
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  httplib::Client cli(base_);
  const auto seconds = static_cast<time_t>(timeout_s_);
  cli.set_read_timeout(seconds, 0);
  cli.set_write_timeout(seconds, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  if (!api_key_.empty()) req.set_header("Authorization", "Bearer " + api_key_);

  StreamedChat out;
  std::string pending;  // received text not yet split into events
  std::string raw;      // the whole body, for an error's message
  bool done = false;
  const auto t0 = Clock::now();
  req.response_handler = [&](const httplib::Response& r) {
    out.status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const double at = ms_since(t0);
    if (out.status != 200) {
      raw.append(data, n);
      return true;
    }
    pending.append(data, n);
    // Events end with a blank line; each of ours is one "data: JSON" line.
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (event.rfind("data: ", 0) != 0) continue;
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      auto chunk = nlohmann::json::parse(payload, nullptr, false);
      if (chunk.is_discarded()) continue;
      if (chunk.contains("error")) {
        out.error = chunk["error"].dump();
        continue;
      }
      read_chunk(chunk, at, out);
    }
    return true;
  };
  auto res = cli.send(req);
  out.total_ms = ms_since(t0);
  if (!res) {
    out.status = 0;
    out.error = fmt::format("no response from {}: {}", base_, httplib::to_string(res.error()));
    return out;
  }
  out.status = res->status;
  if (out.status != 200) {
    auto j = nlohmann::json::parse(raw, nullptr, false);
    out.error = !j.is_discarded() && j.contains("error") && j["error"].is_object()
                    ? j["error"].value("message", raw)
                    : raw;
  } else if (!done && out.error.empty()) {
    out.error = "the stream ended without [DONE]";
  }
  return out;
}

}  // namespace tandem::server
