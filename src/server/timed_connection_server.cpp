#include "server/timed_connection_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "server/api_error.h"

namespace tandem::server {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

enum class Wait { Ready, TimedOut, Failed };

// Waits until `sock` has one of `events` or `deadline` passes. Polls in slices
// so that `give_up` (when given) is looked at every slice.
Wait wait_for(socket_t sock, short events, Clock::time_point deadline,
              const std::function<bool()>* give_up = nullptr) {
  constexpr auto kSlice = std::chrono::milliseconds(50);
  for (;;) {
    if (give_up && (*give_up)()) return Wait::Failed;
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return Wait::TimedOut;
    auto slice = std::min<Clock::duration>(left, give_up ? kSlice : std::chrono::seconds(1));
    const int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(slice).count());
    pollfd p{sock, events, 0};
    const int r = ::poll(&p, 1, ms);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Wait::Failed;
    }
    if (r == 0) continue;
    if (p.revents & (POLLERR | POLLNVAL)) return Wait::Failed;
    return Wait::Ready;  // the event, or a hang-up that the next read reports as EOF
  }
}

void endpoint_of(const sockaddr_storage& ss, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    port = ntohs(a.sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf);
    port = ntohs(a.sin6_port);
  }
  ip = buf;
}

// The socket of one connection, with a deadline on reads that the server moves
// per request phase, a buffer for httplib's byte-at-a-time line reader, and a
// bounded wait before each write.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, Clock::duration write_timeout)
      : sock_(sock), write_timeout_(write_timeout) {}

  void start_request(Clock::time_point read_deadline) {
    read_deadline_ = read_deadline;
    read_timed_out_ = false;
    bytes_written_ = 0;
  }
  void set_read_deadline(Clock::time_point d) { read_deadline_ = d; }
  bool read_timed_out() const { return read_timed_out_; }
  size_t bytes_written() const { return bytes_written_; }

  // Waits for the first byte of the next request.
  bool wait_for_request(Clock::time_point deadline, const std::function<bool()>& stopping) const {
    return buffered() > 0 || wait_for(sock_, POLLIN, deadline, &stopping) == Wait::Ready;
  }

  bool is_readable() const override {
    return buffered() > 0 || wait_for(sock_, POLLIN, read_deadline_) == Wait::Ready;
  }

  bool is_writable() const override {
    return wait_for(sock_, POLLOUT, Clock::now() + write_timeout_) == Wait::Ready && peer_alive();
  }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered() == 0) {
      const Wait w = wait_for(sock_, POLLIN, read_deadline_);
      if (w != Wait::Ready) {
        read_timed_out_ = w == Wait::TimedOut;
        return -1;
      }
      if (size >= buf_.size()) return receive(ptr, size);
      const ssize_t n = receive(buf_.data(), buf_.size());
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, buffered());
    std::memcpy(ptr, buf_.data() + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n > 0) bytes_written_ += static_cast<size_t>(n);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      endpoint_of(ss, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      endpoint_of(ss, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  size_t buffered() const { return end_ - begin_; }

  ssize_t receive(char* ptr, size_t size) {
    ssize_t n;
    do {
      n = ::recv(sock_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  // Whether the client is still there: unread data or no hang-up (as httplib
  // checks before each write of a streamed response).
  bool peer_alive() const {
    pollfd p{sock_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;
    char c;
    return ::recv(sock_, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  socket_t sock_;
  Clock::duration write_timeout_;
  Clock::time_point read_deadline_{};
  bool read_timed_out_ = false;
  size_t bytes_written_ = 0;
  std::array<char, 4096> buf_{};
  size_t begin_ = 0, end_ = 0;
};

// The stream of the connection this HTTP thread is serving, for
// current_request_timed_out() (httplib's error handler has no access to it).
thread_local const DeadlineStream* t_stream = nullptr;

// After refusing a request whose body is still arriving: closing at once, with
// unread bytes in the socket, sends a reset that can destroy the refusal before
// the client reads it. So the sending side is shut first and what the client
// still sends is read and dropped, for a short while (nginx's lingering close).
void linger(socket_t sock) {
  constexpr auto kLinger = std::chrono::seconds(2);
  constexpr size_t kMaxDrained = size_t{16} << 20;
  ::shutdown(sock, SHUT_WR);
  const auto deadline = Clock::now() + kLinger;
  std::array<char, 16384> sink;
  for (size_t drained = 0; drained < kMaxDrained;) {
    if (wait_for(sock, POLLIN, deadline) != Wait::Ready) return;
    const ssize_t n = ::recv(sock, sink.data(), sink.size(), 0);
    if (n <= 0) return;
    drained += static_cast<size_t>(n);
  }
}

void write_all(DeadlineStream& strm, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = strm.write(bytes.data() + off, bytes.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

TimedConnectionServer::TimedConnectionServer(ConnectionTimeouts timeouts) : timeouts_(timeouts) {}

void TimedConnectionServer::set_close_after(
    std::function<bool(const httplib::Request&)> close_after) {
  close_after_ = std::move(close_after);
}

void TimedConnectionServer::set_on_silent_timeout(std::function<void()> on_timeout) {
  on_silent_timeout_ = std::move(on_timeout);
}

bool TimedConnectionServer::current_request_timed_out() {
  return t_stream != nullptr && t_stream->read_timed_out();
}

bool TimedConnectionServer::process_and_close_socket(socket_t sock) {
  DeadlineStream strm(sock, seconds(timeouts_.write_s));
  t_stream = &strm;
  const std::function<bool()> stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
  bool ok = false, refused = false;
  for (size_t served = 0; served < keep_alive_max_count_; ++served) {
    if (!strm.wait_for_request(Clock::now() + seconds(timeouts_.idle_s), stopping)) break;
    strm.start_request(Clock::now() + seconds(timeouts_.header_s));
    bool connection_closed = false, close_after = false;
    const bool last = served + 1 == keep_alive_max_count_;
    ok = process_request(strm, last, connection_closed, [&](httplib::Request& req) {
      // The headers are in: the body gets its own deadline.
      strm.set_read_deadline(Clock::now() + seconds(timeouts_.body_s));
      close_after = close_after_ && close_after_(req);
    });
    if (strm.read_timed_out()) {
      if (strm.bytes_written() == 0) {  // httplib gave up on the request line silently
        if (on_silent_timeout_) on_silent_timeout_();
        const std::string body =
            error_json(ApiError(408,
                                fmt::format("the request did not arrive in time (headers "
                                            "within {} s, body within {} s)",
                                            timeouts_.header_s, timeouts_.body_s),
                                "invalid_request_error", "", "request_timeout"))
                .dump();
        write_all(strm,
                  fmt::format("HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                              "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
                              body.size(), body));
      }
      break;
    }
    refused = close_after;
    if (!ok || connection_closed || close_after) break;
  }
  t_stream = nullptr;
  if (refused) linger(sock);
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace tandem::server
