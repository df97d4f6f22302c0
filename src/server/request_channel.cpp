#include "server/request_channel.h"

namespace tandem::server {

void RequestChannel::push_text(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    text_ += text;
  }
  cv_.notify_one();
}

void RequestChannel::finish(const RequestResult& result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = result;
    finished_ = true;
  }
  cv_.notify_one();
}

RequestChannel::News RequestChannel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return finished_ || !text_.empty(); });
  News n;
  n.text.swap(text_);
  n.finished = finished_;
  return n;
}

}  // namespace tandem::server
