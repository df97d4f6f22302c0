// Hands one request's output from the engine thread (its on_text and on_finish
// callbacks, which must not block) to the HTTP thread serving the client.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "engine/request.h"

namespace tandem::server {

class RequestChannel {
 public:
  // Engine thread.
  void push_text(const std::string& text);
  void finish(const RequestResult& result);

  struct News {
    std::string text;       // text since the last wait
    bool finished = false;  // the result is ready (and all text was handed out)
  };
  // HTTP thread: waits up to `timeout` for text or the end, and takes it.
  News wait(std::chrono::milliseconds timeout);
  // The result, once wait() reported finished.
  const RequestResult& result() const { return result_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  bool finished_ = false;
  RequestResult result_;
};

}  // namespace tandem::server
