// One step of a busy wait, shared by every loop that waits on another thread
// (the thread pool's regions, `bench`'s core-to-core round trip).
#pragma once
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tandem {

// Step `iteration` (0, 1, 2, ...) of a wait loop: a CPU pause at first; then
// give the core away on each step, so that on an oversubscribed machine (other
// processes, or more threads than cores) the thread we wait for gets to run.
inline void spin_wait_step(int iteration) {
  if (iteration < 2048) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  } else {
    std::this_thread::yield();
  }
}

}  // namespace tandem
