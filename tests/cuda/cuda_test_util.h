// What the GPU tests share: the fixture that skips a test where there is no
// CUDA device, and copies between host vectors and device buffers.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "cuda/device.h"

namespace tandem::test {

// Every GPU test's fixture. Without a device (or driver) the test reports
// itself skipped, by name, with the reason, and the run still passes; unless
// TANDEM_REQUIRE_CUDA is set (scripts/gpu_check.sh sets it on the GPU
// machine), where a missing device fails the test instead.
class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() > 0) return;
    if (std::getenv("TANDEM_REQUIRE_CUDA")) FAIL() << "no CUDA device (TANDEM_REQUIRE_CUDA is set)";
    GTEST_SKIP() << "no CUDA device";
  }
};
template <typename P>
class CudaDeviceTestWithParam : public CudaDeviceTest, public ::testing::WithParamInterface<P> {};

template <typename T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) {
  cuda::DeviceBuffer b(v.size() * sizeof(T));
  b.upload(v.data(), v.size() * sizeof(T));
  return b;
}
template <typename T>
std::vector<T> from_device(const cuda::DeviceBuffer& b, size_t count) {
  cuda::synchronize();
  std::vector<T> v(count);
  b.download(v.data(), count * sizeof(T));
  return v;
}

}  // namespace tandem::test
