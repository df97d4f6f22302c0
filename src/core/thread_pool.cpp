#include "core/thread_pool.h"

#include <chrono>
#include <exception>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "core/spin_wait.h"

namespace tandem {
namespace {

// How long an idle worker spins before it sleeps. Long enough to cover the gaps
// between the parallel regions of one forward pass (serial norms, sampling).
constexpr auto kSpinTime = std::chrono::microseconds(500);

// The first exception thrown by a job on any thread; rethrown by the caller.
struct JobError {
  std::mutex mu;
  std::exception_ptr error;
  void capture() {
    std::lock_guard<std::mutex> lock(mu);
    if (!error) error = std::current_exception();
  }
};

}  // namespace

int ThreadPool::physical_cores() {
  // Count distinct (physical id, core id) pairs; fall back to logical CPUs.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys = "0";
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    auto val = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "physical id") phys = val;
    if (key == "core id") cores.insert({phys, val});
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return n > 0 ? n : 1;
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads > 0 ? n_threads : physical_cores()),
      chunk_runs_(std::make_unique<ChunkRun[]>(static_cast<size_t>(n_threads_))) {
  for (int i = 1; i < n_threads_; ++i) threads_.emplace_back(&ThreadPool::worker, this, i);
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);  // wakes the workers into seeing stop_
  { std::lock_guard<std::mutex> lock(sleep_mu_); }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

static std::pair<int64_t, int64_t> chunk_of(int64_t n, int64_t grain, int parts, int i) {
  int64_t units = (n + grain - 1) / grain;
  int64_t b = units * i / parts * grain, e = units * (i + 1) / parts * grain;
  return {std::min(b, n), std::min(e, n)};
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  // n_threads_ chunks, each run once by whichever thread claims it first. The
  // job captures one reference, so that std::function holds it without allocating.
  struct Region {
    const std::function<void(int64_t, int64_t, int)>& fn;
    int64_t n, grain;
    int parts;
    std::atomic<int> next{0};
  } region{fn, n, grain, n_threads_};
  dispatch([&region](int t) {
    for (int c; (c = region.next.fetch_add(1, std::memory_order_relaxed)) < region.parts;) {
      auto [b, e] = chunk_of(region.n, region.grain, region.parts, c);
      if (b < e) region.fn(b, e, t);
    }
  });
}

void ThreadPool::run_self_scheduled(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  dispatch(fn);
}

void ThreadPool::run_chunks(int64_t n, const std::function<void(int64_t, int)>& fn) {
  if (n_threads_ == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  if (n <= 0) return;
  for (int t = 0; t < n_threads_; ++t) {
    chunk_runs_[t].next.store(n * t / n_threads_, std::memory_order_relaxed);
    chunk_runs_[t].end = n * (t + 1) / n_threads_;
  }
  struct Region {  // one reference for the job, so that std::function does not allocate
    const std::function<void(int64_t, int)>& fn;
    ChunkRun* runs;
    int threads;
  } region{fn, chunk_runs_.get(), n_threads_};
  dispatch([&region](int t) {
    for (int d = 0; d < region.threads; ++d) {
      ChunkRun& run = region.runs[(t + d) % region.threads];
      for (int64_t i; (i = run.next.fetch_add(1, std::memory_order_relaxed)) < run.end;)
        region.fn(i, t);
    }
  });
}

ThreadPool::Timing ThreadPool::timing() const {
  return {regions_, region_ns_ / 1e6, busy_ns_.load() / 1e6};
}

void ThreadPool::reset_timing() {
  regions_ = region_ns_ = 0;
  busy_ns_.store(0);
}

namespace {
using Clock = std::chrono::steady_clock;
int64_t ns_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}
}  // namespace

void ThreadPool::dispatch(const std::function<void(int)>& fn) {
  // The job captures one reference, so that std::function holds it without
  // allocating.
  struct Region {
    const std::function<void(int)>& fn;
    JobError errors;
    std::atomic<int64_t>* busy_ns;  // null: not timed
  } region{fn, {}, timing_ ? &busy_ns_ : nullptr};
  const Clock::time_point start = region.busy_ns ? Clock::now() : Clock::time_point{};
  auto guarded = [&region](int t) {
    const Clock::time_point t0 = region.busy_ns ? Clock::now() : Clock::time_point{};
    try {
      region.fn(t);
    } catch (...) {
      region.errors.capture();
    }
    if (region.busy_ns) region.busy_ns->fetch_add(ns_since(t0), std::memory_order_relaxed);
  };
  const std::function<void(int)> job = guarded;
  job_ = &job;
  const uint64_t g = generation_.load(std::memory_order_relaxed) + 1;
  open_generation_.store(g);
  // seq_cst: a worker that registered as a sleeper before this store is seen
  // below and woken; one registering after it sees the new generation.
  generation_.store(g);
  if (sleepers_.load() > 0) {
    // Taking the mutex orders this wake-up after any sleeper's last check.
    { std::lock_guard<std::mutex> lock(sleep_mu_); }
    wake_.notify_all();
  }
  job(0);
  // Close the region, then wait for the workers that joined it. seq_cst pairs
  // with the worker's increment of active_ before it checks open_generation_.
  open_generation_.store(0);
  for (int i = 0; active_.load() != 0; ++i) spin_wait_step(i);
  job_ = nullptr;
  if (region.busy_ns) {
    ++regions_;
    region_ns_ += ns_since(start);
  }
  if (region.errors.error) std::rethrow_exception(region.errors.error);
}

void ThreadPool::worker(int index) {
  // Generation 0 is the constructor's: a region may start before this thread does.
  uint64_t seen = 0;
  for (;;) {
    // Spin for a while, then sleep until the generation moves on.
    auto spin_start = std::chrono::steady_clock::now();
    uint64_t g;
    for (int i = 0;; ++i) {
      g = generation_.load(std::memory_order_acquire);
      if (g != seen) break;
      spin_wait_step(i);
      if ((i & 255) == 255 && std::chrono::steady_clock::now() - spin_start > kSpinTime) {
        std::unique_lock<std::mutex> lock(sleep_mu_);
        sleepers_.fetch_add(1);
        while ((g = generation_.load()) == seen) wake_.wait(lock);
        sleepers_.fetch_sub(1);
        break;
      }
    }
    seen = g;
    if (stop_.load()) return;
    active_.fetch_add(1);
    if (open_generation_.load() == g) (*job_)(index);  // else the caller has finished it
    active_.fetch_sub(1);
  }
}

}  // namespace tandem
