// tandem's OpenAI-compatible HTTP server (cpp-httplib underneath):
//   POST /v1/completions, POST /v1/chat/completions  (streamed as SSE with "stream": true)
//   GET  /v1/models, /v1/models/{id}, /metrics (Prometheus text)
//   GET  /health  readiness: 200 {"status": "ready"}; 503 "starting" while the model
//                 loads, 503 "draining" once a stop was asked for
//   GET  /live    liveness: 200 whenever the server answers HTTP
//   GET  /  the web page (web_page.h)
// It listens before the model has loaded (start(): /health says "starting", the
// API answers 503) and serves once the engine is attached (attach()).
// Every request is served by its own HTTP thread, which waits on the request's
// RequestChannel while the AsyncEngine's thread generates; a client that goes
// away has its request cancelled (its KV blocks are freed at the next step).
// Errors are OpenAI's {"error": {...}} objects with a matching HTTP status.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "server/auth.h"
#include "server/connection_timeouts.h"
#include "server/prometheus.h"
#include "server/request_builder.h"

namespace tandem {
class AsyncEngine;
class Model;
}  // namespace tandem

namespace tandem::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (see bind())
  std::string model_name;            // the id clients use; other names get a 404
  size_t max_body_bytes = 8u << 20;  // larger request bodies get a 413
  int http_threads = 64;             // concurrent connections served (one thread each)
  double drain_timeout_s = 30;       // shutdown: in-flight requests get this long to finish
  bool log_requests = true;          // one stderr line per request
  AccessOptions access;              // API key; /metrics open or not
  ConnectionTimeouts timeouts;       // slow or stalled clients
  MetricsOptions metrics;            // what /metrics names besides tandem's own
};

// What the server serves once the model has loaded.
struct Serving {
  ServingLimits limits;
  RequestDefaults defaults;  // what requests leave open (the sampling mode)
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions opt);
  ~HttpServer();

  // Bind host:port; returns the port (the chosen one for port 0). Throws
  // tandem::Error when the address cannot be bound.
  int bind();
  // Answer HTTP from now on (a thread of its own): /health says "starting" and
  // the API answers 503 until attach().
  void start();
  // Serve the model from now on (/health: "ready"). The engine and the model
  // must outlive the server.
  void attach(AsyncEngine& engine, const Model& model, Serving serving);
  // Serve until a stop is requested, then shut down gracefully: /health says
  // "draining", new requests get 503, in-flight ones finish (or, after
  // drain_timeout_s or a forced stop, are cancelled), and the listener closes.
  // Returns when all handlers are done (starts the listener if start() was not
  // called).
  void serve();
  // Thread-safe and non-blocking (a signal watcher calls it). force: cancel the
  // in-flight requests now instead of letting them finish.
  void request_stop(bool force);

  ServerCounters counters() const;
  // Once attached.
  const RequestBuilder& builder() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::server
