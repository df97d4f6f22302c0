// A persistent pool of worker threads. A token's forward pass opens hundreds of
// parallel regions, so starting one must cost microseconds: workers spin on an
// atomic generation counter for a while after each region (~0.5 ms) and only then
// sleep on a condition variable. Work is claimed dynamically, so the caller never
// waits for a worker that has not started (on a shared, oversubscribed machine
// it may not run for milliseconds), only for those still inside the job. The
// calling thread takes part as thread 0, so a pool of size 1 runs everything
// inline. No threads are created per operation.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads <= 0: physical cores
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // fn(begin, end, thread_index) for disjoint chunks covering [0, n); chunk
  // boundaries are multiples of `grain` (except the end).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn,
                    int64_t grain = 1);
  // fn(thread_index) on the calling thread and on every worker that joins before
  // the caller's fn returns; for work that schedules itself (e.g. chunks taken
  // from an atomic counter), which must not rely on any given thread running.
  // A worker that is descheduled (busy machine) is then simply not waited for.
  void run_self_scheduled(const std::function<void(int)>& fn);
  // fn(chunk, thread_index) once for every chunk in [0, n), where consecutive
  // chunks are consecutive pieces of memory (a matmul's weight rows). Thread t
  // takes the chunks of its own contiguous run [n*t/size, n*(t+1)/size) first,
  // in order, so that its reads are one stream that the hardware prefetchers
  // follow across chunk boundaries; then it helps with what is left of the other
  // threads' runs, so a worker that joins late or not at all is not waited for.
  // (With one shared counter the threads took alternate chunks and each thread's
  // stream jumped at every chunk: small matrices read at 57-75% of the memory
  // bandwidth, against 76-82% this way; docs/decisions.md.)
  void run_chunks(int64_t n, const std::function<void(int64_t, int)>& fn);

  static int physical_cores();

  // Where the pool's time goes, when timing is on (`bench decode --profile`):
  // regions run, their wall time on the calling thread, and the time threads
  // spent inside their jobs; idle = size() * region_ms - busy_ms (threads that
  // waited at a region's end, or joined late or not at all).
  struct Timing {
    int64_t regions = 0;
    double region_ms = 0, busy_ms = 0;
  };
  // Not thread-safe against running regions: set it between them.
  void set_timing(bool on) { timing_ = on; }
  Timing timing() const;
  void reset_timing();

 private:
  void worker(int index);
  void dispatch(const std::function<void(int)>& fn);

  int n_threads_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  // Bumped once per region; workers run the job when they see a new value.
  alignas(64) std::atomic<uint64_t> generation_{0};
  // The generation whose job workers may still join (0: none); workers inside it.
  alignas(64) std::atomic<uint64_t> open_generation_{0};
  alignas(64) std::atomic<int> active_{0};
  alignas(64) std::atomic<int> sleepers_{0};  // workers blocked on wake_
  std::atomic<bool> stop_{false};
  bool timing_ = false;
  int64_t regions_ = 0, region_ns_ = 0;
  std::atomic<int64_t> busy_ns_{0};
  std::mutex sleep_mu_;
  std::condition_variable wake_;
  // run_chunks' runs, one per thread: the next chunk to hand out and the end.
  struct alignas(64) ChunkRun {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<ChunkRun[]> chunk_runs_;
};

}  // namespace tandem
