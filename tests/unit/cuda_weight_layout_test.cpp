// The CUDA backend's device weight layout, on the host: for every weight type
// tandem loads, the planes are aligned and disjoint, repacking moves the GGUF
// bytes without losing any (unpacking restores them), and decoding the
// repacked planes with the kernels' own decoder (cuda/group_decode.h) gives
// exactly the quant layer's reference dequantization, bit for bit (the decoder
// performs the same float operations in the same order; no tolerance).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cuda/group_decode.h"
#include "cuda/weight_layout.h"
#include "quant/quants.h"
#include "support/random_weights.h"
#include "support/test_util.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

using test::kLoadedTypes;

// Group g of row r through the decoder of type t.
void decode(DType t, const WeightPlanes& w, int64_t r, int64_t g, float* out) {
  switch (t) {
    case DType::F32:
      decode_group<DType::F32>(w, r, g, out);
      break;
    case DType::F16:
      decode_group<DType::F16>(w, r, g, out);
      break;
    case DType::BF16:
      decode_group<DType::BF16>(w, r, g, out);
      break;
    case DType::Q4_0:
      decode_group<DType::Q4_0>(w, r, g, out);
      break;
    case DType::Q4_1:
      decode_group<DType::Q4_1>(w, r, g, out);
      break;
    case DType::Q5_0:
      decode_group<DType::Q5_0>(w, r, g, out);
      break;
    case DType::Q8_0:
      decode_group<DType::Q8_0>(w, r, g, out);
      break;
    case DType::Q4_K:
      decode_group<DType::Q4_K>(w, r, g, out);
      break;
    case DType::Q5_K:
      decode_group<DType::Q5_K>(w, r, g, out);
      break;
    case DType::Q6_K:
      decode_group<DType::Q6_K>(w, r, g, out);
      break;
    default:
      FAIL() << "no decoder for " << dtype_name(t);
  }
}

class CudaWeightLayout : public ::testing::TestWithParam<DType> {};

TEST_P(CudaWeightLayout, FieldsCoverTheBlockAndPlanesAreAligned) {
  const DType t = GetParam();
  const WeightLayout l = plan_weight_layout(t, 512, 7);
  EXPECT_EQ(l.ggml_bytes(), dtype_row_bytes(t, 512) * 7);
  // The fields tile the GGUF block: each starts where the previous ends.
  std::vector<BlockField> sorted(l.fields.begin(), l.fields.begin() + l.n_planes);
  std::sort(sorted.begin(), sorted.end(),
            [](const BlockField& a, const BlockField& b) { return a.offset < b.offset; });
  int covered = 0;
  for (const BlockField& f : sorted) {
    EXPECT_EQ(f.offset, covered);
    covered += f.bytes;
  }
  EXPECT_EQ(covered, l.block_bytes);
  for (int p = 0; p < l.n_planes; ++p) {
    SCOPED_TRACE(p);
    EXPECT_EQ(l.plane_offset[p] % kPlaneAlign, 0u);
    // Each entry keeps its loads aligned: 2-byte scales, 4-byte words, 16-byte codes.
    const int b = l.fields[p].bytes;
    EXPECT_TRUE(b == 2 || b % 4 == 0) << b;
    if (b >= 16) {
      EXPECT_EQ(b % 16, 0) << b;
    }
    const size_t end = l.plane_offset[p] + static_cast<size_t>(7 * l.blocks_per_row) * b;
    EXPECT_LE(end, p + 1 < l.n_planes ? l.plane_offset[p + 1] : l.total_bytes);
  }
  EXPECT_LT(l.total_bytes, l.ggml_bytes() + kPlaneAlign * kMaxPlanes);
}

TEST_P(CudaWeightLayout, RepackingKeepsEveryByte) {
  const DType t = GetParam();
  const test::RandomMatrix m = test::random_matrix(t, 512, 5, 11);
  const WeightLayout l = plan_weight_layout(t, m.k, m.n);
  std::vector<uint8_t> device(l.total_bytes, 0xAB), back(m.bytes.size(), 0);
  repack_weights(l, m.bytes.data(), device.data());
  unpack_weights(l, device.data(), back.data());
  EXPECT_EQ(back, m.bytes);
  // The padding after each plane is zeroed, not left as it was.
  for (int p = 0; p < l.n_planes; ++p) {
    const size_t end =
        l.plane_offset[p] + static_cast<size_t>(m.n * l.blocks_per_row) * l.fields[p].bytes;
    const size_t next = p + 1 < l.n_planes ? l.plane_offset[p + 1] : l.total_bytes;
    for (size_t i = end; i < next; ++i) ASSERT_EQ(device[i], 0) << "plane " << p << " byte " << i;
  }
}

TEST_P(CudaWeightLayout, DecodedGroupsEqualTheReferenceBitForBit) {
  const DType t = GetParam();
  const int64_t k = 768, n = 6;  // three K-quant super-blocks per row
  const test::RandomMatrix m = test::random_matrix(t, k, n, 23);
  const WeightLayout l = plan_weight_layout(t, k, n);
  std::vector<uint8_t> device(l.total_bytes);
  repack_weights(l, m.bytes.data(), device.data());
  const WeightPlanes w = weight_planes(l, device.data());
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t g = 0; g < l.groups_per_row(); ++g) decode(t, w, r, g, &row[g * kGroup]);
    ASSERT_EQ(std::memcmp(row.data(), &m.deq[r * k], k * sizeof(float)), 0) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLoadedType, CudaWeightLayout, ::testing::ValuesIn(kLoadedTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaWeightLayoutPlan, SupportsExactlyTheLoadedTypes) {
  for (DType t : kLoadedTypes) EXPECT_TRUE(cuda_supports(t)) << dtype_name(t);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q5_1, DType::Q8_1, DType::Q8_K}) {
    EXPECT_FALSE(cuda_supports(t)) << dtype_name(t);
    EXPECT_NE(test::error_of([&] { plan_weight_layout(t, 256, 1); }).find("no kernels"),
              std::string::npos);
  }
}

TEST(CudaWeightLayoutPlan, RowsMustBeWholeBlocks) {
  EXPECT_NE(test::error_of([] { plan_weight_layout(DType::Q4_K, 320, 2); }), "");
  EXPECT_NE(test::error_of([] { plan_weight_layout(DType::Q4_0, 48, 2); }), "");
  EXPECT_NE(test::error_of([] { plan_weight_layout(DType::F16, 40, 2); }), "");
  EXPECT_NE(test::error_of([] { plan_weight_layout(DType::Q8_0, 0, 2); }), "");
  EXPECT_NE(test::error_of([] { plan_weight_layout(DType::Q8_0, 64, 0); }), "");
  EXPECT_EQ(test::error_of([] { plan_weight_layout(DType::Q6_K, 8960, 3); }), "");
}

// Neighbouring blocks of a row sit side by side in every plane (a warp's lanes
// read one stretch of memory), and row r + 1 follows row r.
TEST(CudaWeightLayoutPlan, BlocksOfAPlaneAreContiguous) {
  const WeightLayout l = plan_weight_layout(DType::Q5_K, 1024, 3);
  std::vector<uint8_t> device(l.total_bytes);
  const WeightPlanes w = weight_planes(l, device.data());
  for (int p = 0; p < l.n_planes; ++p) {
    EXPECT_EQ(w.field(p, 0, 1) - w.field(p, 0, 0), l.fields[p].bytes);
    EXPECT_EQ(w.field(p, 1, 0) - w.field(p, 0, 0), l.fields[p].bytes * l.blocks_per_row);
    EXPECT_EQ(w.field(p, 0, 0) - device.data(), static_cast<ptrdiff_t>(l.plane_offset[p]));
  }
}

}  // namespace
