// Rows in and out of device memory, exactly: the embedding lookup decodes every
// weight type to the reference dequantization's bits (the device decoder is the
// host's, and -fmad=false keeps its arithmetic the same), and kv_store writes
// new positions through the block table as the CPU cache would store them.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda/cuda_kernels.h"
#include "cuda_test_util.h"
#include "quant/quants.h"
#include "support/random_weights.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

using test::kLoadedTypes;

class CudaGetRows : public test::CudaDeviceTestWithParam<DType> {};

TEST_P(CudaGetRows, DecodesRowsToTheReferenceBits) {
  const int64_t k = 768, n = 40;
  const test::RandomMatrix m = test::random_matrix(GetParam(), k, n, 31);
  DeviceBuffer buffer;
  const DeviceMatrix W =
      upload_matrix(plan_weight_layout(GetParam(), k, n), m.bytes.data(), buffer);
  const std::vector<int> ids = {5, 0, 39, 5, 17, 1};
  DeviceBuffer dids = test::to_device(ids), dout(sizeof(float) * ids.size() * k);
  get_rows(W, dids.as<int>(), static_cast<int>(ids.size()), dout.as<float>(), nullptr);
  const std::vector<float> got = test::from_device<float>(dout, ids.size() * k);
  for (size_t i = 0; i < ids.size(); ++i)
    EXPECT_EQ(std::memcmp(&got[i * k], &m.deq[ids[i] * k], k * sizeof(float)), 0)
        << "row " << ids[i];
}

INSTANTIATE_TEST_SUITE_P(EveryLoadedType, CudaGetRows, ::testing::ValuesIn(kLoadedTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

class CudaKvStore : public test::CudaDeviceTestWithParam<DType> {};

// Two sequences' block tables over a pool of 6 blocks; four new positions, two
// of them in a block other than their sequence's first. Every other slot stays
// zero.
TEST_P(CudaKvStore, WritesThroughTheBlockTable) {
  const DType t = GetParam();
  const int block = 16, n_blocks = 6, row_elems = 256, stride = 3;
  const std::vector<int> tables = {4, 1, 5, 0, 3, 2};  // sequence 0: 4 1 5, sequence 1: 0 3 2
  const std::vector<int> seq = {0, 0, 1, 1}, pos = {0, 17, 5, 40};
  const int rows = static_cast<int>(seq.size());
  const std::vector<float> k = test::random_floats(rows * row_elems, 1);
  const std::vector<float> v = test::random_floats(rows * row_elems, 2);
  const size_t row_bytes = dtype_row_bytes(t, row_elems);
  const size_t pool_bytes = row_bytes * block * n_blocks;
  std::vector<uint8_t> want_k(pool_bytes, 0), want_v(pool_bytes, 0);
  for (int r = 0; r < rows; ++r) {
    const int slot = tables[seq[r] * stride + pos[r] / block] * block + pos[r] % block;
    quantize_row(t, &k[r * row_elems], &want_k[slot * row_bytes], row_elems);
    quantize_row(t, &v[r * row_elems], &want_v[slot * row_bytes], row_elems);
  }
  DeviceBuffer dk(pool_bytes), dv(pool_bytes);
  dk.zero();
  dv.zero();
  DeviceBuffer kin = test::to_device(k), vin = test::to_device(v), dseq = test::to_device(seq);
  DeviceBuffer dpos = test::to_device(pos), dtab = test::to_device(tables);
  kv_store(kin.as<float>(), vin.as<float>(), rows, row_elems, dseq.as<int>(), dpos.as<int>(),
           dtab.as<int>(), stride, PagedKV{dk.data(), dv.data(), t, block}, nullptr);
  EXPECT_EQ(test::from_device<uint8_t>(dk, pool_bytes), want_k);
  EXPECT_EQ(test::from_device<uint8_t>(dv, pool_bytes), want_v);
}

INSTANTIATE_TEST_SUITE_P(CacheTypes, CudaKvStore, ::testing::Values(DType::F32, DType::F16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
