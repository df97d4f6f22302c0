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

// A request that cannot run, as the one place that checks requests finds it
// (engine/request_check.h): the field at fault (by its API name), and a
// machine-readable reason. The server answers it with a 400 naming the field,
// the CLI prints the message.
struct RequestError : Error {
  RequestError(std::string field, const std::string& message, std::string code = "invalid_value")
      : Error(message), field(std::move(field)), code(std::move(code)) {}
  std::string field;
  std::string code;  // "invalid_value", "empty_prompt", "context_length_exceeded", ...
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
