// Counting heap allocations in a test program: counting_allocator.cpp replaces
// the global allocation functions of the program it is linked into (only the
// tests that need it: tests/CMakeLists.txt) and counts every call, on every
// thread. With TANDEM_ALLOC_TRACE=1 the first allocations inside a traced window
// print their call stacks (link with -rdynamic for function names).
#pragma once

namespace tandem::test {

// Allocations so far in this program.
long allocations();
// While on, allocations are traced (see above).
void trace_allocations(bool on);

}  // namespace tandem::test
