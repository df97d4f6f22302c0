#include "kernels/kernel_config.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/error.h"

namespace tandem::kernels {
namespace {

// A byte count: digits only, at most 1 GiB (a prefetch distance beyond that is a typo).
int64_t parse_bytes(const char* name, const char* value) {
  const std::string_view s(value);
  int64_t bytes = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), bytes);
  const bool whole = ec == std::errc() && end == s.data() + s.size();
  check(whole && bytes >= 0 && bytes <= (int64_t{1} << 30),
        "{}={}: expected a number of bytes from 0 to 1073741824", name, value);
  return bytes;
}

}  // namespace

KernelConfig kernel_config_from_env(const std::function<const char*(const char*)>& lookup) {
  KernelConfig c;
  if (const char* v = lookup("TANDEM_KERNELS")) {
    check(std::strcmp(v, "ref") == 0 || std::strcmp(v, "simd") == 0,
          "TANDEM_KERNELS={}: expected ref (the scalar reference kernels) or simd", v);
    c.reference = std::strcmp(v, "ref") == 0;
  }
  if (const char* v = lookup("TANDEM_PACK")) {
    check(std::strcmp(v, "0") == 0 || std::strcmp(v, "1") == 0,
          "TANDEM_PACK={}: expected 0 (read the file's layout) or 1 (repack at load)", v);
    c.pack = std::strcmp(v, "1") == 0;
  }
  if (const char* v = lookup("TANDEM_PREFETCH"))
    c.prefetch_bytes = parse_bytes("TANDEM_PREFETCH", v);
  if (const char* v = lookup("TANDEM_PREFETCH_PACKED"))
    c.prefetch_packed_bytes = parse_bytes("TANDEM_PREFETCH_PACKED", v);
  return c;
}

KernelConfig kernel_config_from_env() {
  return kernel_config_from_env([](const char* name) { return std::getenv(name); });
}

}  // namespace tandem::kernels
