// SIGINT and SIGTERM delivered to ordinary code: the signal handler only writes
// the signal number to a pipe (async-signal-safe); a watcher thread reads it and
// calls on_signal(signo, count) where count is 1 for the first signal, 2 for the
// second, ... One instance at a time.
#pragma once
#include <functional>
#include <thread>

namespace tandem::server {

class SignalWatcher {
 public:
  explicit SignalWatcher(std::function<void(int signo, int count)> on_signal);
  ~SignalWatcher();  // restores the previous handlers and stops the thread
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  std::function<void(int, int)> on_signal_;
  int pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace tandem::server
