// The routes: the web page, the completion endpoints, /v1/models, /health and
// /metrics, and error objects for what httplib answers itself (no route, a body
// too large, a read that timed out) and for exceptions in handlers.
#include <fmt/format.h>
#include <sys/socket.h>

#include <cstdio>

#include "model/model.h"
#include "server/heap_usage.h"
#include "server/http/server_impl.h"
#include "server/prometheus.h"
#include "server/web_page.h"

namespace tandem::server {

using json = nlohmann::json;

json HttpServer::Impl::models_json() const {
  json j = {
      {"id", opt.model_name}, {"object", "model"}, {"created", started}, {"owned_by", "tandem"}};
  if (const Backend* b = backend()) j["max_model_len"] = b->serving.limits.n_ctx;
  return j;
}

const char* HttpServer::Impl::state() const {
  if (!backend()) return "starting";
  std::lock_guard<std::mutex> lock(mu);
  return accepting ? "ready" : "draining";
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
  // Readiness, for load balancers and Kubernetes: 503 until the model has loaded
  // and once a stop was asked for, so that no new request is sent here then.
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const std::string status = state();
    send_json(res, status == "ready" ? 200 : 503, {{"status", status}});
  });
  // Liveness: the process answers HTTP (a loading or draining server is alive).
  http.Get("/live", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", state()}});
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const Backend* b = backend();
    const EngineMetrics m = b ? b->engine.metrics() : EngineMetrics{};
    ServerCounters c;
    {
      std::lock_guard<std::mutex> lock(mu);
      c = counters;
    }
    c.heap_bytes_in_use = heap_bytes_in_use();
    const bool ready = b && std::string(state()) == "ready";
    res.set_content(render_prometheus(m, c, ready, opt.metrics),
                    "text/plain; version=0.0.4; charset=utf-8");
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

}  // namespace tandem::server
