#include "handoff_latency.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "core/spin_wait.h"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;

// One batch: thread 0 writes the odd values and waits for the even ones thread
// 1 answers with. Returns nanoseconds a round trip, or nullopt without a partner.
std::optional<double> one_batch(ThreadPool& pool, int round_trips) {
  struct alignas(64) Line {
    std::atomic<int64_t> value{0};
  };
  Line ball;
  alignas(64) std::atomic<bool> joined{false};
  alignas(64) std::atomic<bool> gave_up{false};
  std::optional<double> ns;
  pool.run_self_scheduled([&](int thread) {
    if (thread == 1) {
      joined.store(true, std::memory_order_release);
      for (int64_t i = 0; i < round_trips; ++i) {
        for (int spins = 0; ball.value.load(std::memory_order_acquire) != 2 * i + 1;) {
          if (gave_up.load(std::memory_order_relaxed)) return;
          spin_wait_step(spins++);
        }
        ball.value.store(2 * i + 2, std::memory_order_release);
      }
      return;
    }
    if (thread != 0) return;
    const auto deadline = Clock::now() + std::chrono::milliseconds(100);
    for (int spins = 0; !joined.load(std::memory_order_acquire);) {
      if (Clock::now() > deadline) {
        gave_up.store(true, std::memory_order_relaxed);
        return;
      }
      spin_wait_step(spins++);
    }
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < round_trips; ++i) {
      ball.value.store(2 * i + 1, std::memory_order_release);
      for (int spins = 0; ball.value.load(std::memory_order_acquire) != 2 * i + 2;)
        spin_wait_step(spins++);
    }
    ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / round_trips;
  });
  return ns;
}

}  // namespace

std::optional<double> measure_handoff_ns(ThreadPool& pool, int round_trips, int batches) {
  if (pool.size() < 2 || round_trips < 1 || batches < 1) return std::nullopt;
  std::vector<double> ns;
  for (int b = 0; b < batches; ++b)
    if (const auto r = one_batch(pool, round_trips)) ns.push_back(*r);
  if (ns.empty()) return std::nullopt;
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

}  // namespace tandem::cli
