#include "support/alloc/counting_allocator.h"

#include <execinfo.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace {

std::atomic<long> g_allocations{0};
std::atomic<bool> g_tracing{false};
thread_local bool t_in_trace = false;
int g_traced = 0;

void trace() {
  if (t_in_trace || !g_tracing.load() || g_traced >= 5 || !std::getenv("TANDEM_ALLOC_TRACE"))
    return;
  t_in_trace = true;
  ++g_traced;
  void* frames[24];
  const int n = backtrace(frames, 24);
  std::fprintf(stderr, "--- allocation %d in a traced window:\n", g_traced);
  backtrace_symbols_fd(frames, n, 2);
  t_in_trace = false;
}

void* counted_alloc(size_t size, size_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  trace();
  if (size == 0) size = 1;
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(align, (size + align - 1) / align * align);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(size_t size) { return counted_alloc(size, alignof(std::max_align_t)); }
void* operator new(size_t size, std::align_val_t align) {
  return counted_alloc(size, static_cast<size_t>(align));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace tandem::test {

long allocations() { return g_allocations.load(); }
void trace_allocations(bool on) { g_tracing = on; }

}  // namespace tandem::test
