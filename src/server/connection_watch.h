// Noticing that an HTTP client went away while its request is still queued or
// generating. cpp-httplib 0.11 gives a handler no access to its socket, so the
// watch finds it among the process's descriptors by its two endpoints (address
// and port of each side, which identify a TCP connection) and then polls it for
// a hang-up. The descriptor stays valid while the handler runs: httplib closes
// a connection only after its handler returns.
#pragma once
#include <string>

namespace tandem::server {

class ConnectionWatch {
 public:
  ConnectionWatch(const std::string& local_addr, int local_port, const std::string& remote_addr,
                  int remote_port);
  // Whether the peer closed or reset the connection. False when the socket was
  // not found (then only a failed write reveals a disconnect).
  bool closed() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace tandem::server
