// Cache-line aligned storage, for buffers that SIMD kernels read a whole vector
// at a time: with every 64-byte vector inside one cache line, no load straddles
// two (which costs double).
#pragma once
#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

namespace tandem {

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
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
