// A thread-safe front for the Engine: one background thread runs the engine's
// steps; any thread submits, cancels and reads metrics. The server uses it.
// Callbacks (a request's on_text and on_finish) run on the engine thread and
// must not block for long (hand the data to the client's thread and return).
#pragma once
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace tandem {

class AsyncEngine {
 public:
  // max_queue: requests waiting for admission at most; beyond it submit refuses.
  AsyncEngine(std::unique_ptr<Engine> engine, int max_queue);
  ~AsyncEngine();  // shutdown(false)

  enum class Submit { Accepted, QueueFull, ShuttingDown };
  // Queues the request (trusted: checked against engine().limits() where it
  // entered). On Accepted, *id is its id, usable with cancel().
  Submit submit(Request request, int* id);
  // Cancel a request (queued or running): its on_finish runs with "cancelled".
  void cancel(int id);
  EngineMetrics metrics();
  // Stop accepting requests; finish the in-flight ones (drain) or cancel them;
  // then stop the engine thread. Idempotent.
  void shutdown(bool drain);

  const Engine& engine() const { return *engine_; }

 private:
  void loop();

  std::unique_ptr<Engine> engine_;
  int max_queue_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::pair<int, Request>> inbox_;  // submitted, not yet in the engine
  std::vector<int> cancels_;
  int next_id_ = 0;
  bool accepting_ = true, stopping_ = false, drain_ = false;
  std::map<int, int> engine_ids_;  // our id -> the engine's, engine thread only
  EngineMetrics metrics_;          // refreshed by the engine thread after every step
  std::thread thread_;
};

}  // namespace tandem
