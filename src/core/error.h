// Error reporting: library code throws tandem::Error with a message that names
// the file, field or value at fault; front ends print it as one line and exit.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace tandem {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// check(cond, "...") throws tandem::Error when cond is false.
template <typename... Args>
void check(bool cond, fmt::format_string<Args...> f, Args&&... args) {
  if (!cond) throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tandem
