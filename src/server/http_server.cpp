#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"
#include "engine/async_engine.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/connection_watch.h"
#include "server/openai_response.h"
#include "server/request_channel.h"
#include "server/sse.h"
#include "server/timed_connection_server.h"
#include "server/web_page.h"

namespace tandem::server {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// How often a waiting handler looks for a client that went away.
constexpr auto kPollInterval = 100ms;
// After a forced cancel, how long shutdown waits for handlers to notice.
constexpr auto kCancelGrace = 10s;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status, error_json(e));
}

bool finished_normally(const RequestResult& r) {
  return r.finish_reason == "stop" || r.finish_reason == "length";
}

// The error a client gets for a request the engine did not finish normally.
ApiError engine_failure(const RequestResult& r) {
  if (r.finish_reason == "cancelled")
    return ApiError(503, "the request was cancelled: the server is shutting down", "server_error",
                    "", "cancelled");
  return ApiError(
      500,
      fmt::format("generation failed (finish reason '{}'); see the server log", r.finish_reason),
      "server_error", "", "engine_error");
}

const char* rejection_reason(int status) {
  switch (status) {
    case 400:
      return "invalid";
    case 401:
      return "unauthorized";
    case 404:
      return "model_not_found";
    case 408:
      return "timeout";
    case 413:
      return "too_large";
    case 429:
      return "queue_full";
    case 503:
      return "shutting_down";
    default:
      return "other";
  }
}

}  // namespace

struct HttpServer::Impl {
  Impl(AsyncEngine& e, const Model& m, ServerOptions o)
      : engine(e),
        model(m),
        opt(std::move(o)),
        builder(m, opt.limits, opt.defaults),
        access(opt.access),
        started(unix_now()),
        http(opt.timeouts) {}

  // One generation request being served; shutdown waits until none is left.
  class Ticket {
   public:
    Ticket(Impl& s, uint64_t key) : s_(s), key_(key) {}
    ~Ticket() { s_.release(key_); }
    void set_engine_id(int id) {
      std::lock_guard<std::mutex> lock(s_.mu);
      s_.in_flight[key_] = id;
    }

   private:
    Impl& s_;
    uint64_t key_;
  };

  // What a streamed response's content provider needs between calls.
  struct Stream {
    std::shared_ptr<Ticket> ticket;
    std::shared_ptr<RequestChannel> channel;
    ConnectionWatch watch;
    ResponseMeta meta;
    bool include_usage = false;
    int id = -1;
    bool role_sent = false, ended = false;
    size_t text_offset = 0;  // completions' logprobs.text_offset so far
  };

  void setup_routes();
  void setup_guards();
  std::optional<ApiError> refusal_before_body(const httplib::Request& req) const;
  std::shared_ptr<Ticket> admit();
  void release(uint64_t key);
  void count_rejection(int status);
  void client_gone(int id);
  void handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  void respond_when_done(httplib::Response& res, RequestChannel& ch, const ConnectionWatch& watch,
                         const ResponseMeta& meta, int id);
  bool pump_stream(Stream& st, httplib::DataSink& sink);
  json models_json() const;
  void drain();

  AsyncEngine& engine;
  const Model& model;
  ServerOptions opt;
  RequestBuilder builder;
  AccessControl access;
  int64_t started;
  TimedConnectionServer http;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool accepting = true, stop_requested = false, force = false, listener_done = false;
  std::map<uint64_t, int> in_flight;  // ticket -> engine id (-1 until submitted)
  uint64_t next_ticket = 0;
  ServerCounters counters;
};

std::shared_ptr<HttpServer::Impl::Ticket> HttpServer::Impl::admit() {
  std::lock_guard<std::mutex> lock(mu);
  if (!accepting)
    throw ApiError(503, "the server is shutting down and accepts no new requests", "server_error",
                   "", "shutting_down");
  const uint64_t key = next_ticket++;
  in_flight[key] = -1;
  counters.http_in_flight = static_cast<int64_t>(in_flight.size());
  return std::make_shared<Ticket>(*this, key);
}

void HttpServer::Impl::release(uint64_t key) {
  {
    std::lock_guard<std::mutex> lock(mu);
    in_flight.erase(key);
    counters.http_in_flight = static_cast<int64_t>(in_flight.size());
  }
  cv.notify_all();
}

void HttpServer::Impl::count_rejection(int status) {
  std::lock_guard<std::mutex> lock(mu);
  counters.rejected[rejection_reason(status)]++;
}

void HttpServer::Impl::client_gone(int id) {
  engine.cancel(id);
  std::lock_guard<std::mutex> lock(mu);
  counters.client_disconnects++;
}

void HttpServer::Impl::handle_generation(const httplib::Request& req, httplib::Response& res,
                                         Endpoint ep) {
  std::shared_ptr<Ticket> ticket;
  auto channel = std::make_shared<RequestChannel>();
  bool stream = false, include_usage = false, logprobs = false;
  SamplingParams sampling;
  int id = -1;
  try {
    ticket = admit();
    ParsedRequest p = parse_request(req.body, ep);
    if (!p.model.empty() && p.model != opt.model_name)
      throw ApiError(404,
                     fmt::format("the model '{}' does not exist: this server serves '{}'", p.model,
                                 opt.model_name),
                     "invalid_request_error", "model", "model_not_found");
    Request r = builder.build(p);
    stream = p.stream;
    include_usage = p.include_usage;
    logprobs = r.params.logprobs >= 0;
    sampling = r.params.sampling;
    // Only a stream reads the tokens as they come; a whole response is built
    // from the result.
    if (stream) r.on_token = [channel](const TokenOutput& t) { channel->push(t); };
    r.on_finish = [channel](const RequestResult& result) { channel->finish(result); };
    AsyncEngine::Submit outcome;
    try {
      outcome = engine.submit(std::move(r), &id);
    } catch (const Error& e) {
      invalid_request("", e.what(), "invalid_value");  // what validate() refused
    }
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
  meta.tokenizer = model.tokenizer();
  meta.seed = sampling.seed;
  meta.sampling_mode = sampling.greedy() ? "greedy" : sampling_mode_name(sampling.mode);
  ConnectionWatch watch(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  if (!stream) {
    respond_when_done(res, *channel, watch, meta, id);
    return;
  }
  auto st = std::make_shared<Stream>(Stream{ticket, channel, watch, meta, include_usage, id});
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
  if (!news.tokens.empty() && !send(text_chunk(st.meta, news, st.include_usage, &st.text_offset)))
    return gone();
  if (news.finished) {
    st.ended = true;
    const RequestResult& r = st.channel->result();
    bool ok;
    if (finished_normally(r)) {
      ok = send(finish_chunk(st.meta, r, st.include_usage));
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

json HttpServer::Impl::models_json() const {
  return {{"id", opt.model_name},
          {"object", "model"},
          {"created", started},
          {"owned_by", "tandem"},
          {"max_model_len", opt.limits.n_ctx}};
}

void HttpServer::Impl::setup_routes() {
  // The web page: chat with streaming, speculation shown token by token.
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = web_page_html();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Endpoint::Completions);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(req, res, Endpoint::ChatCompletions);
  });
  for (const char* path : {"/v1/completions", "/v1/chat/completions"})
    http.Get(path, [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Allow", "POST");
      send_error(res, ApiError(405, "this endpoint takes POST", "invalid_request_error", "",
                               "method_not_allowed"));
    });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({models_json()})}});
  });
  http.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    if (name == opt.model_name)
      send_json(res, 200, models_json());
    else
      send_error(res, ApiError(404,
                               fmt::format("the model '{}' does not exist: this server "
                                           "serves '{}'",
                                           name, opt.model_name),
                               "invalid_request_error", "model", "model_not_found"));
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    if (accepting)
      send_json(res, 200, {{"status", "ok"}});
    else
      send_json(res, 503, {{"status", "shutting_down"}});
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const EngineMetrics m = engine.metrics();
    ServerCounters c;
    {
      std::lock_guard<std::mutex> lock(mu);
      c = counters;
    }
    res.set_content(render_prometheus(m, c), "text/plain; version=0.0.4; charset=utf-8");
  });

  // Statuses httplib sets itself (no route, body too large, ...) get an error object too.
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty() || res.status < 400)
          return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 400 && TimedConnectionServer::current_request_timed_out())
          res.status = 408;  // httplib reports a read that missed its deadline as malformed
        ApiError e = error_for_status(res.status);
        if (res.status == 408) {
          count_rejection(408);
          e = ApiError(408,
                       fmt::format("the request did not arrive in time (headers within {} s, "
                                   "body within {} s)",
                                   opt.timeouts.header_s, opt.timeouts.body_s),
                       "invalid_request_error", "", "request_timeout");
        }
        if (res.status == 413) {
          count_rejection(413);
          e = ApiError(413,
                       fmt::format("the request body is larger than the server's limit of {} "
                                   "bytes",
                                   opt.max_body_bytes),
                       "invalid_request_error", "", "request_too_large");
        }
        res.set_content(dump(error_json(e)), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::fprintf(stderr, "server: handler error: %s\n", what.c_str());
    send_error(res, ApiError(500, fmt::format("internal server error: {}", what), "server_error"));
  });
  if (opt.log_requests)
    http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      std::fprintf(stderr, "%s %s %s %d\n", req.remote_addr.c_str(), req.method.c_str(),
                   req.path.c_str(), res.status);
    });
  const int threads = std::max(4, opt.http_threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(opt.max_body_bytes);
  // httplib's default adds SO_REUSEPORT, which lets a second server bind a port
  // that is in use (the kernel then splits connections between them): refuse that.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.set_keep_alive_max_count(1000);
}

// Refusals decided from the headers alone, before httplib reads the body: a
// missing or wrong API key, a declared body over the limit.
std::optional<ApiError> HttpServer::Impl::refusal_before_body(const httplib::Request& req) const {
  if (access.protects(req.path)) {
    const std::string auth = req.get_header_value("Authorization");
    if (!access.accepts(auth)) return access.refusal(auth);
  }
  const std::string length = req.get_header_value("Content-Length");
  if (!length.empty()) {
    errno = 0;
    const unsigned long long n = std::strtoull(length.c_str(), nullptr, 10);
    if (errno == ERANGE || n > opt.max_body_bytes)
      return ApiError(413,
                      fmt::format("the request body is larger than the server's limit of {} bytes",
                                  opt.max_body_bytes),
                      "invalid_request_error", "", "request_too_large");
  }
  return std::nullopt;
}

void HttpServer::Impl::setup_guards() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    auto refusal = refusal_before_body(req);
    if (!refusal) return httplib::Server::HandlerResponse::Unhandled;
    if (refusal->status == 401) res.set_header("WWW-Authenticate", "Bearer");
    res.set_header("Connection", "close");  // see set_close_after below
    count_rejection(refusal->status);
    send_error(res, *refusal);
    return httplib::Server::HandlerResponse::Handled;
  });
  // The body of a refused request stays unread: the connection must not go on
  // to parse it as the next request.
  http.set_close_after(
      [this](const httplib::Request& req) { return refusal_before_body(req).has_value(); });
  http.set_on_silent_timeout([this] { count_rejection(408); });
}

void HttpServer::Impl::drain() {
  std::unique_lock<std::mutex> lock(mu);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(opt.drain_timeout_s));
  if (!in_flight.empty() && !force)
    std::fprintf(stderr, "server: waiting for %zu in-flight request(s) to finish\n",
                 in_flight.size());
  cv.wait_until(lock, deadline, [&] { return in_flight.empty() || force; });
  if (in_flight.empty()) return;
  std::fprintf(stderr, "server: cancelling %zu in-flight request(s)\n", in_flight.size());
  for (const auto& [key, id] : in_flight)
    if (id >= 0) engine.cancel(id);
  cv.wait_for(lock, kCancelGrace, [&] { return in_flight.empty(); });
}

HttpServer::HttpServer(AsyncEngine& engine, const Model& model, ServerOptions opt)
    : impl_(std::make_unique<Impl>(engine, model, std::move(opt))) {
  impl_->setup_routes();
  impl_->setup_guards();
}

HttpServer::~HttpServer() {
  if (impl_->http.is_running()) impl_->http.stop();
}

int HttpServer::bind() {
  const auto& o = impl_->opt;
  int port = o.port;
  if (port == 0)
    port = impl_->http.bind_to_any_port(o.host);
  else if (!impl_->http.bind_to_port(o.host, port))
    port = -1;
  check(port > 0, "cannot listen on {}:{} (address in use, or not an address of this machine)",
        o.host, o.port);
  return port;
}

void HttpServer::serve() {
  Impl& s = *impl_;
  std::thread listener([&s] {
    if (!s.http.listen_after_bind()) std::fprintf(stderr, "server: the listener failed\n");
    std::lock_guard<std::mutex> lock(s.mu);
    s.listener_done = true;
    s.cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait(lock, [&] { return s.stop_requested || s.listener_done; });
    s.accepting = false;
  }
  s.drain();
  s.http.stop();
  listener.join();
}

void HttpServer::request_stop(bool force) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->accepting = false;
    impl_->stop_requested = true;
    if (force) impl_->force = true;
  }
  impl_->cv.notify_all();
}

ServerCounters HttpServer::counters() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->counters;
}

const RequestBuilder& HttpServer::builder() const { return impl_->builder; }

}  // namespace tandem::server
