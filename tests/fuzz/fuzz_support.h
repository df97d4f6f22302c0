// What the fuzz targets share: a private scratch directory for loaders that
// read files, a check that stops the run on a broken invariant (the fuzzer
// reports it like a crash, with the input), and splitting one input into parts.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::fuzz {

// A directory of this process's own under /dev/shm (else $TMPDIR or /tmp),
// removed at exit.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `size` bytes to path()/name (replacing it) and returns its path.
  std::string write(const std::string& name, const void* data, size_t size) const;
  std::string write(const std::string& name, std::string_view text) const {
    return write(name, text.data(), text.size());
  }

 private:
  std::string path_;
};

// Writes `size` bytes to `path`, replacing the file.
void write_file(const std::string& path, const void* data, size_t size);

// Prints the broken invariant and aborts (a finding, like a sanitizer report).
[[noreturn]] void violated(const char* condition, const char* file, int line);

// Splits `input` at each `sep` into at most max_parts parts (the last takes the rest).
std::vector<std::string_view> split(std::string_view input, char sep, size_t max_parts);

}  // namespace tandem::fuzz

#define FUZZ_CHECK(cond) ((cond) ? (void)0 : ::tandem::fuzz::violated(#cond, __FILE__, __LINE__))
