// Hands one request's output from the engine thread (its on_token and on_finish
// callbacks, which must not block) to the HTTP thread serving the client.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"

namespace tandem::server {

// One streamed output, copied off the engine thread.
struct StreamedToken {
  int id = -1;           // -1: text that became final without a token
  bool drafted = false;  // an accepted draft token
  std::string text;      // the text it made final
  std::optional<TokenLogprobs> logprobs;
};

class RequestChannel {
 public:
  // Engine thread.
  void push(const TokenOutput& out);
  void finish(const RequestResult& result);

  struct News {
    std::string text;                   // text since the last wait
    std::vector<StreamedToken> tokens;  // the outputs that made it, in order
    int drafted = 0, accepted = 0;      // the request's counts so far
    bool finished = false;              // the result is ready (and all text was handed out)
  };
  // HTTP thread: waits up to `timeout` for output or the end, and takes it.
  News wait(std::chrono::milliseconds timeout);
  // The result, once wait() reported finished.
  const RequestResult& result() const { return result_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  News pending_;
  RequestResult result_;
};

}  // namespace tandem::server
