// Admission: what is refused before a body is read (a missing or wrong API key,
// a declared body over the limit), the tickets of the requests in flight, the
// rejection counts /metrics reports, and draining them at shutdown.
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "server/http/server_impl.h"

namespace tandem::server {
namespace {

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
  if (Backend* b = backend()) b->engine.cancel(id);
  std::lock_guard<std::mutex> lock(mu);
  counters.client_disconnects++;
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
  if (Backend* b = backend())
    for (const auto& [key, id] : in_flight)
      if (id >= 0) b->engine.cancel(id);
  cv.wait_for(lock, kCancelGrace, [&] { return in_flight.empty(); });
}

}  // namespace tandem::server
