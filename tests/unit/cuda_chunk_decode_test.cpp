// The lanes GEMV mapping's decoder (cuda/chunk_decode.h), on the host: for
// every weight type tandem loads, each 16-byte chunk decodes to exactly the bits
// decode_group (and so the quant layer's reference dequantization) gives the
// same elements, for quantized random matrices and for blocks of random bytes
// (every code, scale and NaN pattern); the teams' lanes and their chunks cover
// every element of a row exactly once, for the row lengths of the real models
// and small ones; the planes are aligned for the decoder's 16-byte loads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "cuda/chunk_decode.h"
#include "cuda/group_decode.h"
#include "cuda/weight_layout.h"
#include "cuda/weight_type.h"
#include "cuda_model/device_weights.h"
#include "support/random_weights.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

using test::kLoadedTypes;

// The row lengths of the real shapes (Qwen2.5-Coder 1.5B and 0.5B, Llama-3.2 1B
// and 3B: d_model and d_ff), then small ones (one block, partial passes).
const int64_t kRealK[] = {1536, 8960, 896, 4864, 2048, 8192, 3072};
const int64_t kSmallK[] = {32, 64, 96, 256, 512, 768, 1024, 1280, 2304};

// The plane that holds a row's codes or values: the one its chunks tile.
int main_plane(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q8_0:
      return 1;
    case DType::Q5_0:
    case DType::Q4_K:
      return 2;
    case DType::Q5_K:
      return 3;
    default:  // the float types' values, Q6_K's ql
      return 0;
  }
}

// The elements of chunk c of a row, in the order decode_chunk writes them.
template <DType T>
std::vector<int64_t> chunk_elements(int64_t c) {
  using S = ChunkShape<T>;
  std::vector<int64_t> e;
  for (int run = 0; run < S::kRuns; ++run)
    for (int i = 0; i < S::kRunLen; ++i) e.push_back(S::first(c) + run * S::kRunStride + i);
  return e;
}

// Row r of the repacked matrix at `planes`, decoded by groups and by chunks.
struct TwoDecodes {
  std::vector<float> groups, chunks;
};
template <DType T>
TwoDecodes decode_both(const WeightLayout& l, const WeightPlanes& planes, int64_t r) {
  TwoDecodes d;
  d.groups.resize(static_cast<size_t>(l.k));
  d.chunks.assign(static_cast<size_t>(l.k), std::nanf("0x7ab"));  // a value no decode writes
  for (int64_t g = 0; g < l.groups_per_row(); ++g)
    decode_group<T>(planes, r, g, &d.groups[g * kGroup]);
  for (int64_t c = 0; c < chunks_per_row<T>(l.k); ++c) {
    float out[kMaxChunkElems];
    decode_chunk<T>(planes, r, c, out);
    const std::vector<int64_t> e = chunk_elements<T>(c);
    for (size_t i = 0; i < e.size(); ++i) d.chunks[e[i]] = out[i];
  }
  return d;
}

// Every row of a repacked copy of `ggml` (layout l): chunks and groups agree bit for bit.
void expect_same_bits(const WeightLayout& l, const std::vector<uint8_t>& ggml) {
  std::vector<uint8_t> device(l.total_bytes);
  repack_weights(l, ggml.data(), device.data());
  const WeightPlanes planes = weight_planes(l, device.data());
  with_weight_type(l.type, [&](auto tag) {
    for (int64_t r = 0; r < l.n; ++r) {
      const TwoDecodes d = decode_both<decltype(tag)::value>(l, planes, r);
      ASSERT_EQ(std::memcmp(d.groups.data(), d.chunks.data(), l.k * sizeof(float)), 0)
          << "row " << r;
    }
  });
}

class CudaChunkDecode : public ::testing::TestWithParam<DType> {};

// Quantized normal values (one block all zero, an outlier row): the chunks give
// decode_group's bits, which are the reference dequantization's.
TEST_P(CudaChunkDecode, ChunksEqualDecodeGroupOnRandomMatrices) {
  const DType t = GetParam();
  for (int64_t k : {int64_t{768}, int64_t{1536}}) {
    SCOPED_TRACE(k);
    const test::RandomMatrix m = test::random_matrix(t, k, 5, 31);
    const WeightLayout l = plan_weight_layout(t, k, m.n);
    expect_same_bits(l, m.bytes);
    // And the reference's own bits (cuda_weight_layout_test checks decode_group's).
    std::vector<uint8_t> device(l.total_bytes);
    repack_weights(l, m.bytes.data(), device.data());
    with_weight_type(t, [&](auto tag) {
      const TwoDecodes d = decode_both<decltype(tag)::value>(l, weight_planes(l, device.data()), 2);
      EXPECT_EQ(std::memcmp(d.chunks.data(), &m.deq[2 * k], k * sizeof(float)), 0);
    });
  }
}

// Blocks of random bytes: every code, scale and sign pattern, infinities and
// NaNs among the fp16 scales and float values.
TEST_P(CudaChunkDecode, ChunksEqualDecodeGroupOnRandomBytes) {
  const DType t = GetParam();
  const WeightLayout l = plan_weight_layout(t, 1024, 16);
  std::mt19937 rng(7);
  std::vector<uint8_t> ggml(l.ggml_bytes());
  for (uint8_t& b : ggml) b = static_cast<uint8_t>(rng());
  expect_same_bits(l, ggml);
}

// The teams of lanes_per_column(K) lanes, lane l taking chunks l, l + team, ...:
// every element of the row exactly once, from chunks that tile the row's main
// plane, each run of elements aligned for float4 loads of the activations.
TEST_P(CudaChunkDecode, LanesCoverEveryElementOnce) {
  const DType t = GetParam();
  const int block = dtype_info(t).block_size == 256 ? 256 : 32;
  std::vector<int64_t> ks(std::begin(kRealK), std::end(kRealK));
  ks.insert(ks.end(), std::begin(kSmallK), std::end(kSmallK));
  with_weight_type(t, [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    using S = ChunkShape<T>;
    for (int64_t k : ks) {
      if (k % block != 0) continue;  // not a row of this type (896 for the K-quants)
      SCOPED_TRACE(k);
      const WeightLayout l = plan_weight_layout(T, k, 1);
      EXPECT_EQ(chunks_per_row<T>(k) * kChunkBytes,
                l.blocks_per_row * l.fields[main_plane(T)].bytes);
      const int team = lanes_per_column(k);
      ASSERT_TRUE(team == 16 || team == 32) << team;  // make_team's teams divide a warp
      std::vector<int> seen(static_cast<size_t>(k), 0);
      for (int lane = 0; lane < team; ++lane) {
        for (int64_t c = lane; c < chunks_per_row<T>(k); c += team) {
          for (int run = 0; run < S::kRuns; ++run)
            EXPECT_EQ((S::first(c) + run * S::kRunStride) % 4, 0);
          for (int64_t e : chunk_elements<T>(c)) {
            ASSERT_GE(e, 0);
            ASSERT_LT(e, k) << "chunk " << c;
            ++seen[e];
          }
        }
      }
      for (int64_t e = 0; e < k; ++e) ASSERT_EQ(seen[e], 1) << "element " << e;
    }
  });
}

// The planes a copy planned at a 256-byte boundary has suit every load, and so
// do a matrix's row ranges (a restricted LM head); a copy 8 bytes off does not.
TEST_P(CudaChunkDecode, PlanesAreAlignedForTheLoads) {
  const DType t = GetParam();
  const WeightLayout l = plan_weight_layout(t, 1536, 40);
  std::vector<uint8_t> buffer(l.total_bytes + 512);
  uint8_t* base = buffer.data() + (256 - reinterpret_cast<uintptr_t>(buffer.data()) % 256);
  EXPECT_TRUE(planes_aligned(l, base));
  EXPECT_FALSE(planes_aligned(l, base + 8));
  const cuda::DeviceMatrix rows = cuda_model::matrix_rows({l, base}, 7, 33);
  EXPECT_TRUE(planes_aligned(rows.layout, rows.data));
}

INSTANTIATE_TEST_SUITE_P(EveryLoadedType, CudaChunkDecode, ::testing::ValuesIn(kLoadedTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A team of 16 where a team of 32 would leave half its last pass idle, K alone.
TEST(CudaChunkDecodeTeams, SixteenWhereALastPassOf32WouldBeHalfIdle) {
  EXPECT_EQ(lanes_per_column(1536), 16);  // 48 four-bit chunks: 3 passes of 16
  EXPECT_EQ(lanes_per_column(256), 16);   // 8
  EXPECT_EQ(lanes_per_column(512), 16);   // 16
  EXPECT_EQ(lanes_per_column(768), 32);   // 24
  EXPECT_EQ(lanes_per_column(896), 32);   // 28
  EXPECT_EQ(lanes_per_column(1024), 32);  // 32
  EXPECT_EQ(lanes_per_column(2048), 32);
  EXPECT_EQ(lanes_per_column(3072), 32);
  EXPECT_EQ(lanes_per_column(4864), 32);  // 152: 4 full passes and 24
  EXPECT_EQ(lanes_per_column(8192), 32);
  EXPECT_EQ(lanes_per_column(8960), 32);  // 280: 8 full passes and 24
}

// small_int_to_float is static_cast<float> bit for bit over the codes' range
// and beyond (signed zero included).
TEST(CudaChunkDecodeTeams, SmallIntToFloatIsTheConversion) {
  auto same = [](int q) {
    const float a = small_int_to_float(q), b = static_cast<float>(q);
    return std::memcmp(&a, &b, sizeof a) == 0;
  };
  for (int q = -70000; q <= 70000; ++q) ASSERT_TRUE(same(q)) << q;
  for (int q : {(1 << 22) - 1, -(1 << 22) + 1, 1 << 21, -(1 << 21)}) EXPECT_TRUE(same(q)) << q;
}

}  // namespace
