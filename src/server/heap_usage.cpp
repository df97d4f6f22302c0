#include "server/heap_usage.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tandem::server {

// Under AddressSanitizer or ThreadSanitizer their own allocator serves malloc,
// and mallinfo2 would describe glibc's idle one.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TANDEM_HEAP_UNKNOWN 1
#endif

int64_t heap_bytes_in_use() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33)) && \
    !defined(TANDEM_HEAP_UNKNOWN)
  const struct mallinfo2 info = mallinfo2();
  return static_cast<int64_t>(info.uordblks + info.hblkhd);
#else
  return -1;
#endif
}

}  // namespace tandem::server
