// A completion request from body to response: parsed, built and checked
// (request_builder.h), submitted, then answered whole when it finishes or
// streamed as SSE chunks while it runs; a client that goes away has its request
// cancelled.
#include <fmt/format.h>

#include "server/http/server_impl.h"
#include "server/sse.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;

bool finished_normally(const RequestResult& r) {
  return r.finish_reason == FinishReason::Stop || r.finish_reason == FinishReason::Length;
}

// The error a client gets for a request the engine did not finish normally.
ApiError engine_failure(const RequestResult& r) {
  if (r.finish_reason == FinishReason::Cancelled)
    return ApiError(503, "the request was cancelled: the server is shutting down", "server_error",
                    "", "cancelled");
  return ApiError(500,
                  fmt::format("generation failed (finish reason '{}'); see the server log",
                              finish_reason_name(r.finish_reason)),
                  "server_error", "", "engine_error");
}

}  // namespace

void HttpServer::Impl::handle_generation(const httplib::Request& req, httplib::Response& res,
                                         Endpoint ep) {
  std::shared_ptr<Ticket> ticket;
  auto channel = std::make_shared<RequestChannel>();
  bool stream = false, include_usage = false, logprobs = false;
  std::optional<ToolCallFormat> tool_format;
  SamplingParams sampling;
  int id = -1;
  try {
    ticket = admit();
    if (!backend())
      throw ApiError(503, "the server is loading its model; retry shortly", "server_error", "",
                     "model_loading");
    Backend& b = *backend();
    ParsedRequest p = parse_request(req.body, ep);
    if (!p.model.empty() && p.model != opt.model_name)
      throw ApiError(404,
                     fmt::format("the model '{}' does not exist: this server serves '{}'", p.model,
                                 opt.model_name),
                     "invalid_request_error", "model", "model_not_found");
    Request r = b.builder.build(p, access.tenant(req.get_header_value("Authorization")));
    stream = p.stream;
    include_usage = p.include_usage;
    logprobs = r.params.logprobs >= 0;
    if (p.tools.calls_possible()) tool_format = b.builder.tool_format();
    sampling = r.params.sampling;
    // Only a stream reads the tokens as they come; a whole response is built
    // from the result.
    if (stream) r.on_token = [channel](const TokenOutput& t) { channel->push(t); };
    r.on_finish = [channel](const RequestResult& result) { channel->finish(result); };
    const AsyncEngine::Submit outcome = b.engine.submit(std::move(r), &id);
    if (outcome == AsyncEngine::Submit::QueueFull)
      throw ApiError(429, "the server's request queue is full; retry later", "rate_limit_error", "",
                     "queue_full");
    if (outcome == AsyncEngine::Submit::ShuttingDown)
      throw ApiError(503, "the server is shutting down and accepts no new requests", "server_error",
                     "", "shutting_down");
    ticket->set_engine_id(id);
  } catch (const ApiError& e) {
    count_rejection(e.status);
    send_error(res, e);
    return;
  }

  ResponseMeta meta = make_meta(ep, opt.model_name);
  meta.logprobs = logprobs;
  meta.tokenizer = backend()->model.tokenizer();
  meta.seed = sampling.seed;
  meta.sampling_mode = sampling.greedy() ? "greedy" : sampling_mode_name(sampling.mode);
  meta.tool_format = tool_format;
  ConnectionWatch watch(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  if (!stream) {
    respond_when_done(res, *channel, watch, meta, id);
    return;
  }
  auto st = std::make_shared<Stream>(
      Stream{ticket, channel, watch, meta, include_usage, id, false, false, 0, std::nullopt});
  if (tool_format) st->calls.emplace(*tool_format);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st](size_t, httplib::DataSink& sink) { return pump_stream(*st, sink); },
      [this, st](bool) {
        // The response is gone: written in full, or the connection failed.
        if (!st->ended) {
          st->ended = true;
          client_gone(st->id);
        }
        st->ticket.reset();
      });
}

void HttpServer::Impl::respond_when_done(httplib::Response& res, RequestChannel& ch,
                                         const ConnectionWatch& watch, const ResponseMeta& meta,
                                         int id) {
  while (!ch.wait(kPollInterval).finished) {
    if (watch.closed()) {
      client_gone(id);
      res.status = 499;  // nginx's "client closed request": nobody reads this
      res.set_content("", "text/plain");
      return;
    }
  }
  const RequestResult& r = ch.result();
  if (finished_normally(r))
    send_json(res, 200, completion_json(meta, r));
  else
    send_error(res, engine_failure(r));
}

bool HttpServer::Impl::pump_stream(Stream& st, httplib::DataSink& sink) {
  auto send = [&](const json& j) {
    const std::string ev = sse_event(dump(j));
    return sink.write(ev.data(), ev.size());
  };
  auto gone = [&] {
    st.ended = true;
    client_gone(st.id);
    return false;
  };
  if (st.meta.endpoint == Endpoint::ChatCompletions && !st.role_sent) {
    st.role_sent = true;
    if (!send(role_chunk(st.meta, st.include_usage))) return gone();
  }
  const RequestChannel::News news = st.channel->wait(kPollInterval);
  // Every output arrives as a token (text without a token too): each is sent,
  // even one that released no text yet (part of a character, a held-back
  // possible stop string), so that tandem.tokens lists every token.
  ToolCallStream* calls = st.calls ? &*st.calls : nullptr;
  if (!news.tokens.empty() &&
      !send(text_chunk(st.meta, news, st.include_usage, &st.text_offset, calls)))
    return gone();
  if (news.finished) {
    st.ended = true;
    const RequestResult& r = st.channel->result();
    bool ok;
    if (finished_normally(r)) {
      ok = true;
      if (calls)
        if (std::string rest = calls->finish(); !rest.empty())
          ok = send(content_chunk(st.meta, rest, st.include_usage));
      ok = ok &&
           send(finish_chunk(st.meta, r, st.include_usage, calls && calls->complete_calls() > 0));
      if (ok && st.include_usage) ok = send(usage_chunk(st.meta, r));
    } else {
      // The status line is long gone: the error travels as an event, as OpenAI's does.
      ok = send(error_json(engine_failure(r)));
    }
    const std::string done = sse_done();
    if (ok) sink.write(done.data(), done.size());
    sink.done();
    return true;
  }
  if (st.watch.closed()) return gone();
  return true;
}

}  // namespace tandem::server
