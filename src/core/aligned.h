// Cache-line aligned storage, for buffers that SIMD kernels read a whole vector
// at a time: with every 64-byte vector inside one cache line, no load straddles
// two (which costs double).
#pragma once
#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

namespace tandem {

// Large buffers (packed weights, KV caches) on transparent huge pages: where
// the kernel gives them only on request (THP "madvise", Debian's default), a
// buffer streamed at memory speed otherwise crosses a 4 KiB page every 64 cache
// lines, each crossing a TLB miss and a stop for the hardware prefetchers.
// Returns the bytes the allocation takes (a multiple of the huge page size for
// large buffers), so that deallocation uses the same alignment.
void* allocate_aligned(size_t bytes);
void free_aligned(void* p, size_t bytes);

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_aligned(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { free_aligned(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

template <typename T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

// Sizes a scratch buffer whose contents need not survive to n elements. When it
// must grow it grows at least twofold, without copying the old contents, and
// touches every new page at once: so growth is rare and its cost (allocation,
// page faults) is paid here, where the caller can keep it out of the forward
// passes it times (a growth inside a timed pass is priced by the draft policy
// as the cost of the pass; docs/decisions.md, "Untimed buffer growth").
template <typename T>
void resize_scratch(AlignedVector<T>& v, size_t n) {
  if (n > v.capacity()) {
    const size_t capacity = std::max(n, 2 * v.capacity());
    AlignedVector<T>().swap(v);
    v.resize(capacity);
  }
  v.resize(n);
}

}  // namespace tandem
