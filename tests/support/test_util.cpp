#include "support/test_util.h"

#include <fstream>
#include <iterator>

#include "core/error.h"

namespace tandem::test {

std::vector<int> pseudo_random_ids(int n, int vocab, uint32_t seed) {
  std::vector<int> ids;
  uint32_t s = 12345u + 7919u * seed;
  for (int i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    ids.push_back(static_cast<int>((s >> 8) % static_cast<uint32_t>(vocab)));
  }
  return ids;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tandem::test
