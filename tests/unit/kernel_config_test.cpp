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
}

TEST(KernelConfig, BadValuesNameTheVariable) {
  const std::vector<std::pair<std::string, std::string>> bad = {{"TANDEM_KERNELS", "fast"},
                                                                {"TANDEM_PACK", "no"},
                                                                {"TANDEM_PREFETCH", "-64"},
                                                                {"TANDEM_PREFETCH", "4k"},
                                                                {"TANDEM_PREFETCH_PACKED", ""}};
  for (const auto& [name, value] : bad) {
    const std::string e = test::error_of([&] { from({{name, value}}); });
    EXPECT_EQ(e.rfind(name + "=" + value + ":", 0), 0u) << e;
  }
}
