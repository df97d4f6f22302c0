// The device the GPU tests run on, and device memory: what the report of a
// device check starts with (name, compute capability, memory), and buffers
// that copy both ways, zero, move and refuse copies past their end.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "cuda/device.h"
#include "cuda_test_util.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

using CudaDevice = test::CudaDeviceTest;

// The kernels are built for sm_90a (and compute_90a PTX, which only sm_90a
// runs): any other device cannot run them.
TEST_F(CudaDevice, TheDeviceRunsSm90aCode) {
  const DeviceProperties p = device_properties();
  std::printf("device: %s, sm_%d%d, %d SMs, %.1f of %.1f GiB free\n", p.name.c_str(), p.major,
              p.minor, p.multiprocessors, p.free_bytes / 1073741824.0,
              p.total_bytes / 1073741824.0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_EQ(p.major * 10 + p.minor, 90);
  EXPECT_GT(p.free_bytes, 0u);
  EXPECT_LE(p.free_bytes, p.total_bytes);
}

TEST_F(CudaDevice, BuffersCopyBothWaysZeroAndMove) {
  std::vector<int> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = i * 7;
  DeviceBuffer b = test::to_device(v);
  EXPECT_EQ(b.size(), 4000u);
  EXPECT_EQ(test::from_device<int>(b, 1000), v);
  std::vector<int> tail(10);
  b.download(tail.data(), 40, 990 * sizeof(int));
  EXPECT_EQ(tail[0], 990 * 7);
  DeviceBuffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.size(), 4000u);
  moved.zero();
  EXPECT_EQ(test::from_device<int>(moved, 1000), std::vector<int>(1000, 0));
  EXPECT_THROW(moved.upload(v.data(), 4000, 4), std::exception);
  EXPECT_THROW(moved.download(v.data(), 4004), std::exception);
}

}  // namespace
