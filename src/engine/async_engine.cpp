#include "engine/async_engine.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <chrono>
#include <cstdio>
#include <exception>

namespace tandem {

namespace {

// Hands the heap memory that requests freed back to the system. glibc keeps
// freed chunks in the arena of the thread that freed them, and a server's many
// HTTP threads each keep their own: in the 5-minute soak the resident
// anonymous memory grew 7-13 MB a minute while heaptrack saw under 4 MB of heap
// in use, and one malloc_trim gave back 30 MB (docs/reliability.md).
void release_freed_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace

AsyncEngine::AsyncEngine(std::unique_ptr<Engine> engine, int max_queue)
    : engine_(std::move(engine)), max_queue_(max_queue) {
  metrics_ = engine_->metrics();
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() { shutdown(false); }

AsyncEngine::Submit AsyncEngine::submit(Request request, int* id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_) return Submit::ShuttingDown;
  // metrics_.queued counts the engine's queue at its last step plus the inbox.
  if (metrics_.queued >= max_queue_) return Submit::QueueFull;
  *id = next_id_++;
  inbox_.emplace_back(*id, std::move(request));
  metrics_.queued++;  // until the engine thread's next snapshot
  wake_.notify_one();
  return Submit::Accepted;
}

void AsyncEngine::cancel(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancels_.push_back(id);
  wake_.notify_one();
}

EngineMetrics AsyncEngine::metrics() {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void AsyncEngine::shutdown(bool drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    if (!stopping_) drain_ = drain;
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void AsyncEngine::loop() {
  // Freed memory goes back when the engine turns idle, at most once a second:
  // off the steps' path, and bounded under a load that idles after each request.
  using Clock = std::chrono::steady_clock;
  bool was_busy = false;
  Clock::time_point last_release{};
  for (;;) {
    std::vector<std::pair<int, Request>> inbox;
    std::vector<int> cancels;
    bool stopping, drain;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] {
        return stopping_ || !inbox_.empty() || !cancels_.empty() || !engine_->idle();
      });
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      stopping = stopping_;
      drain = drain_;
    }
    for (auto& [our_id, request] : inbox) {
      // Forget the mapping when the request ends, whichever way. (A copy to
      // capture: lambdas cannot capture structured bindings before clang 16.)
      const int id = our_id;
      auto user_finish = std::move(request.on_finish);
      request.on_finish = [this, id, user_finish](const RequestResult& r) {
        engine_ids_.erase(id);
        if (user_finish) user_finish(r);
      };
      engine_ids_[id] = engine_->submit(std::move(request));
    }
    for (int id : cancels) {
      auto it = engine_ids_.find(id);
      if (it != engine_ids_.end()) engine_->cancel(it->second);
    }
    if (stopping && !drain) {
      std::vector<int> all;
      for (auto [ours, theirs] : engine_ids_) all.push_back(theirs);
      for (int id : all) engine_->cancel(id);
    }
    try {
      if (!engine_->idle()) engine_->step();
    } catch (const std::exception& e) {
      // Should not happen; if it does, fail the requests rather than hang them.
      std::fprintf(stderr, "engine error: %s\n", e.what());
      engine_->abort_all(FinishReason::Error);
    }
    const bool busy = !engine_->idle();
    if (was_busy && !busy && Clock::now() - last_release >= std::chrono::seconds(1)) {
      release_freed_memory();
      last_release = Clock::now();
    }
    was_busy = busy;
    std::lock_guard<std::mutex> lock(mu_);
    metrics_ = engine_->metrics();
    metrics_.queued += static_cast<int>(inbox_.size());
    if (stopping && engine_->idle() && inbox_.empty()) return;
  }
}

}  // namespace tandem
