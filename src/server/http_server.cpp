#include "server/http_server.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.h"
#include "server/http/server_impl.h"

namespace tandem::server {
namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

HttpServer::Impl::Impl(ServerOptions o)
    : opt(std::move(o)), access(opt.access), started(unix_now()), http(opt.timeouts) {}

HttpServer::HttpServer(ServerOptions opt) : impl_(std::make_unique<Impl>(std::move(opt))) {
  impl_->setup_routes();
  impl_->setup_guards();
}

HttpServer::~HttpServer() {
  if (impl_->http.is_running()) impl_->http.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
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

void HttpServer::start() {
  Impl& s = *impl_;
  if (s.listener.joinable()) return;
  s.listener = std::thread([&s] {
    if (!s.http.listen_after_bind()) std::fprintf(stderr, "server: the listener failed\n");
    std::lock_guard<std::mutex> lock(s.mu);
    s.listener_done = true;
    s.cv.notify_all();
  });
}

void HttpServer::attach(AsyncEngine& engine, const Model& model, Serving serving) {
  Impl& s = *impl_;
  check(!s.backend(), "the server already serves a model");
  s.backend_owned = std::make_unique<Impl::Backend>(engine, model, serving);
  s.backend_ready.store(s.backend_owned.get(), std::memory_order_release);
}

void HttpServer::serve() {
  Impl& s = *impl_;
  start();
  {
    std::unique_lock<std::mutex> lock(s.mu);
    s.cv.wait(lock, [&] { return s.stop_requested || s.listener_done; });
    s.accepting = false;
  }
  s.drain();
  s.http.stop();
  s.listener.join();
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

const RequestBuilder& HttpServer::builder() const {
  check(impl_->backend() != nullptr, "the server serves no model yet");
  return impl_->backend()->builder;
}

}  // namespace tandem::server
