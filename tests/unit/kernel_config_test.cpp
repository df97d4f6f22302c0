// The kernel knobs front ends read from the environment: defaults, each
// variable, and a clear error naming the variable for a value it cannot use.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_config.h"
#include "support/test_util.h"

using namespace tandem;

namespace {

kernels::KernelConfig from(const std::map<std::string, std::string>& env) {
  return kernels::kernel_config_from_env([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

}  // namespace

TEST(KernelConfig, DefaultsWithoutVariables) {
  const kernels::KernelConfig c = from({}), d;
  EXPECT_EQ(c.reference, d.reference);
  EXPECT_EQ(c.pack, d.pack);
  EXPECT_EQ(c.simd_target, 0);
  EXPECT_EQ(c.prefetch_bytes, d.prefetch_bytes);
  EXPECT_EQ(c.prefetch_packed_bytes, d.prefetch_packed_bytes);
  EXPECT_EQ(c.stream_prefetch, kernels::StreamPrefetch::Auto);
  EXPECT_FALSE(c.reference);
  EXPECT_TRUE(c.pack);
}

TEST(KernelConfig, EachVariable) {
  EXPECT_TRUE(from({{"TANDEM_KERNELS", "ref"}}).reference);
  EXPECT_FALSE(from({{"TANDEM_KERNELS", "simd"}}).reference);
  EXPECT_FALSE(from({{"TANDEM_PACK", "0"}}).pack);
  EXPECT_TRUE(from({{"TANDEM_PACK", "1"}}).pack);
  EXPECT_EQ(from({{"TANDEM_PREFETCH", "0"}}).prefetch_bytes, 0);
  EXPECT_EQ(from({{"TANDEM_PREFETCH", "4096"}}).prefetch_bytes, 4096);
  EXPECT_EQ(from({{"TANDEM_PREFETCH_PACKED", "12288"}}).prefetch_packed_bytes, 12288);
  EXPECT_EQ(from({{"TANDEM_STREAM_PREFETCH", "l2"}}).stream_prefetch, kernels::StreamPrefetch::L2);
  EXPECT_EQ(from({{"TANDEM_STREAM_PREFETCH", "nta"}}).stream_prefetch,
            kernels::StreamPrefetch::NonTemporal);
  EXPECT_EQ(from({{"TANDEM_STREAM_PREFETCH", "auto"}}).stream_prefetch,
            kernels::StreamPrefetch::Auto);
}

// Auto is non-temporal on the CPUs where it was measured to pay (AMD family 26,
// Zen 5), into L2 on the others (Zen 4 and 3 are family 25; Intel's are 6); a
// choice named in the configuration holds on any CPU.
TEST(KernelConfig, StreamPrefetchPerCpu) {
  using kernels::StreamPrefetch;
  const kernels::CpuIdentity zen5{"AuthenticAMD", 26}, zen4{"AuthenticAMD", 25},
      xeon{"GenuineIntel", 6}, none{"", 0};
  EXPECT_TRUE(kernels::non_temporal_streams(StreamPrefetch::Auto, zen5));
  EXPECT_FALSE(kernels::non_temporal_streams(StreamPrefetch::Auto, zen4));
  EXPECT_FALSE(kernels::non_temporal_streams(StreamPrefetch::Auto, xeon));
  EXPECT_FALSE(kernels::non_temporal_streams(StreamPrefetch::Auto, none));
  for (const auto& cpu : {zen5, zen4, xeon, none}) {
    EXPECT_TRUE(kernels::non_temporal_streams(StreamPrefetch::NonTemporal, cpu)) << cpu.vendor;
    EXPECT_FALSE(kernels::non_temporal_streams(StreamPrefetch::L2, cpu)) << cpu.vendor;
  }
  EXPECT_STREQ(kernels::stream_prefetch_name(StreamPrefetch::NonTemporal), "nta");
  EXPECT_STREQ(kernels::stream_prefetch_name(StreamPrefetch::L2), "l2");
#if defined(__x86_64__)
  // cpuid's vendor is 12 characters, and every x86-64 CPU's family is at least 6.
  const kernels::CpuIdentity here = kernels::this_cpu();
  EXPECT_EQ(std::string(here.vendor).size(), 12u);
  EXPECT_GE(here.family, 6);
#endif
}

TEST(KernelConfig, BadValuesNameTheVariable) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"TANDEM_KERNELS", "fast"}, {"TANDEM_PACK", "no"},          {"TANDEM_PREFETCH", "-64"},
      {"TANDEM_PREFETCH", "4k"},  {"TANDEM_PREFETCH_PACKED", ""}, {"TANDEM_STREAM_PREFETCH", "t0"}};
  for (const auto& [name, value] : bad) {
    const std::string e = test::error_of([&] { from({{name, value}}); });
    EXPECT_EQ(e.rfind(name + "=" + value + ":", 0), 0u) << e;
  }
}
