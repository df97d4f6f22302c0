// cpp-httplib's server with deadlines per connection (ConnectionTimeouts), so
// that slow or stalled clients cannot hold the HTTP threads. httplib's own
// timeouts apply to each read: a client sending one byte every few seconds
// keeps its thread forever. A request whose headers or body do not arrive in
// time gets 408 and the connection is closed. Handlers are not timed:
// generation takes what it takes.
//
// httplib lets a subclass replace process_and_close_socket (its TLS server does
// the same) and run the requests of a connection with process_request over a
// Stream of its own; the routing, handlers and responses stay httplib's.
#pragma once
#include <httplib.h>

#include <functional>

#include "server/connection_timeouts.h"

namespace tandem::server {

class TimedConnectionServer : public httplib::Server {
 public:
  explicit TimedConnectionServer(ConnectionTimeouts timeouts);

  // Called with each request's headers before its body is read; returning true
  // closes the connection after the response (for requests refused before
  // their body was read, whose unread bytes must not be taken for a request).
  void set_close_after(std::function<bool(const httplib::Request&)> close_after);

  // Called (on the HTTP thread) for each request whose request line did not
  // arrive in time: httplib gives up on those silently and this server answers
  // 408 itself. Later timeouts reach httplib's error handler (see below).
  void set_on_silent_timeout(std::function<void()> on_timeout);

  const ConnectionTimeouts& timeouts() const { return timeouts_; }
  // On an HTTP thread, inside httplib's error handler: whether the request being
  // answered failed because its headers or body missed their deadline (httplib
  // then reports 400 "malformed", which the handler should turn into 408).
  static bool current_request_timed_out();

 private:
  bool process_and_close_socket(socket_t sock) override;

  ConnectionTimeouts timeouts_;
  std::function<bool(const httplib::Request&)> close_after_;
  std::function<void()> on_silent_timeout_;
};

}  // namespace tandem::server
