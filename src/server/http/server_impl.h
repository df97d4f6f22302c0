// The HTTP server's insides (http_server.h is its interface), shared by the
// files that serve one concern each: routes.cpp (the routes and the web page),
// generation.cpp (completions, whole and streamed), admission.cpp (API key and
// size limits, requests in flight, draining), and http_server.cpp (bind, serve,
// stop).
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "engine/async_engine.h"
#include "server/api_error.h"
#include "server/connection_watch.h"
#include "server/http_server.h"
#include "server/openai_response.h"
#include "server/request_channel.h"
#include "server/timed_connection_server.h"

namespace tandem::server {

using namespace std::chrono_literals;

// How often a waiting handler looks for a client that went away.
constexpr auto kPollInterval = 100ms;
// After a forced cancel, how long shutdown waits for handlers to notice.
constexpr auto kCancelGrace = 10s;

inline void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

inline void send_error(httplib::Response& res, const ApiError& e) {
  if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
  send_json(res, e.status, error_json(e));
}

struct HttpServer::Impl {
  explicit Impl(ServerOptions o);

  // What the server serves once the model has loaded (attach()).
  struct Backend {
    Backend(AsyncEngine& e, const Model& m, Serving s)
        : engine(e), model(m), serving(s), builder(m, s.limits, s.defaults) {}
    AsyncEngine& engine;
    const Model& model;
    Serving serving;
    RequestBuilder builder;
  };
  // The backend, or null while the model loads.
  Backend* backend() const { return backend_ready.load(std::memory_order_acquire); }
  // "starting", "ready" or "draining".
  const char* state() const;

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
    size_t text_offset = 0;               // completions' logprobs.text_offset so far
    std::optional<ToolCallStream> calls;  // chat with tools: the calls read from the text
  };

  // routes.cpp: every route and httplib's handlers for errors and exceptions.
  void setup_routes();
  nlohmann::json models_json() const;
  // admission.cpp: refusals before the body is read (API key, size), the
  // tickets of requests in flight, rejection counts, draining at shutdown.
  void setup_guards();
  std::optional<ApiError> refusal_before_body(const httplib::Request& req) const;
  std::shared_ptr<Ticket> admit();
  void release(uint64_t key);
  void count_rejection(int status);
  void client_gone(int id);
  void drain();
  // generation.cpp: a completion request from body to response, whole or streamed.
  void handle_generation(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  void respond_when_done(httplib::Response& res, RequestChannel& ch, const ConnectionWatch& watch,
                         const ResponseMeta& meta, int id);
  bool pump_stream(Stream& st, httplib::DataSink& sink);

  ServerOptions opt;
  std::unique_ptr<Backend> backend_owned;
  std::atomic<Backend*> backend_ready{nullptr};
  AccessControl access;
  int64_t started;
  TimedConnectionServer http;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool accepting = true, stop_requested = false, force = false, listener_done = false;
  std::thread listener;               // runs httplib's accept loop once started
  std::map<uint64_t, int> in_flight;  // ticket -> engine id (-1 until submitted)
  uint64_t next_ticket = 0;
  ServerCounters counters;
};

}  // namespace tandem::server
