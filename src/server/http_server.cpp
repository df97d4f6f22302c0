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

HttpServer::Impl::Impl(AsyncEngine& e, const Model& m, ServerOptions o)
    : engine(e),
      model(m),
      opt(std::move(o)),
      builder(m, opt.limits, opt.defaults),
      access(opt.access),
      started(unix_now()),
      http(opt.timeouts) {}

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
