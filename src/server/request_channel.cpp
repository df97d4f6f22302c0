#include "server/request_channel.h"

namespace tandem::server {

void RequestChannel::push(const TokenOutput& out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.text += out.text;
    StreamedToken t{out.id, out.drafted, out.text, std::nullopt};
    if (out.logprobs) t.logprobs = *out.logprobs;
    pending_.tokens.push_back(std::move(t));
    if (out.stats) {
      pending_.drafted = out.stats->drafted;
      pending_.accepted = out.stats->accepted;
    }
  }
  cv_.notify_one();
}

void RequestChannel::finish(const RequestResult& result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = result;
    pending_.finished = true;
  }
  cv_.notify_one();
}

RequestChannel::News RequestChannel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return pending_.finished || !pending_.tokens.empty(); });
  News n = std::move(pending_);
  pending_ = News{};
  pending_.finished = n.finished;
  pending_.drafted = n.drafted;
  pending_.accepted = n.accepted;
  return n;
}

}  // namespace tandem::server
