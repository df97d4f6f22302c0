// How long the HTTP server waits on a client (see timed_connection_server.h).
// Kept apart from that header so that code configuring the server does not
// include cpp-httplib, whose header must see the feature macros it was built with.
#pragma once

namespace tandem::server {

struct ConnectionTimeouts {
  double idle_s = 5;     // to start a request, also between requests on a kept-alive connection
  double header_s = 10;  // from a request's first byte to the end of its headers
  double body_s = 60;    // from the end of the headers to the end of the body
  double write_s = 10;   // for each write to make progress (a client that stops reading)
};

}  // namespace tandem::server
