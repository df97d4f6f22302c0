#include "kernels/kernel_config.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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
  if (const char* v = lookup("TANDEM_STREAM_PREFETCH")) {
    const std::string_view s(v);
    check(s == "auto" || s == "l2" || s == "nta",
          "TANDEM_STREAM_PREFETCH={}: expected auto (chosen per CPU), l2 (prefetcht1) or nta "
          "(prefetchnta)",
          v);
    c.stream_prefetch = s == "l2"    ? StreamPrefetch::L2
                        : s == "nta" ? StreamPrefetch::NonTemporal
                                     : StreamPrefetch::Auto;
  }
  return c;
}

KernelConfig kernel_config_from_env() {
  return kernel_config_from_env([](const char* name) { return std::getenv(name); });
}

const char* stream_prefetch_name(StreamPrefetch s) {
  switch (s) {
    case StreamPrefetch::L2:
      return "l2";
    case StreamPrefetch::NonTemporal:
      return "nta";
    default:
      return "auto";
  }
}

CpuIdentity this_cpu() {
#if defined(__x86_64__) || defined(__i386__)
  static const CpuIdentity cpu = [] {
    static char vendor[13] = {};
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return CpuIdentity{"", 0};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    if (!__get_cpuid(1, &a, &b, &c, &d)) return CpuIdentity{vendor, 0};
    // Family: bits 8-11, plus the extended family (bits 20-27) where those read 15.
    int family = static_cast<int>((a >> 8) & 0xf);
    if (family == 0xf) family += static_cast<int>((a >> 20) & 0xff);
    return CpuIdentity{vendor, family};
  }();
  return cpu;
#else
  return CpuIdentity{"", 0};
#endif
}

bool non_temporal_streams(StreamPrefetch choice, const CpuIdentity& cpu) {
  if (choice != StreamPrefetch::Auto) return choice == StreamPrefetch::NonTemporal;
  return std::strcmp(cpu.vendor, "AuthenticAMD") == 0 && cpu.family >= 26;
}

}  // namespace tandem::kernels
