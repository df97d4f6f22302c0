#include "server/signal_watcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>

#include "core/error.h"

namespace tandem::server {
namespace {

std::atomic<int> g_write_fd{-1};
struct sigaction g_old_int, g_old_term;

extern "C" void on_signal_write_pipe(int signo) {
  const int saved = errno;
  const int fd = g_write_fd.load();
  if (fd >= 0) {
    const unsigned char b = static_cast<unsigned char>(signo);
    [[maybe_unused]] ssize_t n = write(fd, &b, 1);
  }
  errno = saved;
}

}  // namespace

SignalWatcher::SignalWatcher(std::function<void(int, int)> on_signal)
    : on_signal_(std::move(on_signal)) {
  check(g_write_fd.load() < 0, "only one SignalWatcher may exist at a time");
  check(pipe2(pipe_, O_CLOEXEC) == 0, "cannot create the signal pipe (errno {})", errno);
  g_write_fd = pipe_[1];
  struct sigaction sa {};
  sa.sa_handler = on_signal_write_pipe;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  thread_ = std::thread([this] {
    int count = 0;
    for (;;) {
      unsigned char b = 0;
      const ssize_t n = read(pipe_[0], &b, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || b == 0) return;  // 0: the destructor's stop byte
      on_signal_(b, ++count);
    }
  });
}

SignalWatcher::~SignalWatcher() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  g_write_fd = -1;
  const unsigned char stop = 0;
  [[maybe_unused]] ssize_t n = write(pipe_[1], &stop, 1);
  if (thread_.joinable()) thread_.join();
  close(pipe_[0]);
  close(pipe_[1]);
}

}  // namespace tandem::server
