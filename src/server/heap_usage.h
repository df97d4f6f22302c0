// The bytes malloc has handed out and not had back: what a leak grows, unlike
// the resident set, which also holds what the allocator keeps after frees
// (docs/reliability.md, "What the soak judges").
#pragma once
#include <cstdint>

namespace tandem::server {

// Bytes in use by malloc (glibc's mallinfo2: the arenas' in-use chunks plus its
// mmapped ones), or -1 where it is not known (another C library, or a
// sanitizer's allocator).
int64_t heap_bytes_in_use();

}  // namespace tandem::server
