#include "core/aligned.h"

#include <sys/mman.h>

namespace tandem {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Buffers from this size on are aligned to huge pages and advised to use them:
// below it the rounding would waste more than the TLB saves.
constexpr size_t kHugeFrom = size_t{4} << 20;
constexpr std::align_val_t kCacheLine{64};
constexpr std::align_val_t kHugeAlign{kHugePage};

bool huge(size_t bytes) { return bytes >= kHugeFrom; }

}  // namespace

void* allocate_aligned(size_t bytes) {
  if (!huge(bytes)) return ::operator new(bytes, kCacheLine);
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = ::operator new(rounded, kHugeAlign);
  // Advice only: a kernel without THP ignores it and the buffer works as before.
  madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void free_aligned(void* p, size_t bytes) {
  ::operator delete(p, huge(bytes) ? kHugeAlign : kCacheLine);
}

}  // namespace tandem
