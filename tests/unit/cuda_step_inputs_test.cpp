// The host side of the CUDA forward pass, on the CPU: a pass's per-row inputs
// (the rows' sequences, block tables and tree remaps as the device attention
// reads them, equal to what the CPU attention reads through KVSeqView), the
// row ranges of a repacked matrix (a draft's restricted LM head), and the
// --device errors where CUDA cannot run.
#include <gtest/gtest.h>

#include <map>

#include "cuda/group_decode.h"
#include "cuda/weight_layout.h"
#include "cuda_model/device_choice.h"
#include "cuda_model/device_weights.h"
#include "cuda_model/step_inputs.h"
#include "quant/quants.h"
#include "support/random_weights.h"
#include "support/test_util.h"

using namespace tandem;
using namespace tandem::cuda_model;

namespace {

StepLimits limits() {
  StepLimits l;
  l.max_rows = 32;
  l.max_seqs = 4;
  l.table_stride = 8;
  l.max_remap = 32;
  l.rope_half = 4;
  return l;
}

// The physical position a row reads for logical position p, as the device
// kernel computes it from the row's inputs.
int device_physical(const StepInputs& s, int r, int p) {
  return p >= s.remap_from[r] ? s.remap[size_t(r) * s.remap_stride + p - s.remap_from[r]] : p;
}

// Slot 3: a chain of 2 after 10 cached positions; slot 1: a tree after 5 cached
// positions (root, two children, a grandchild under the second child).
ForwardBatch mixed_batch() {
  ForwardBatch b;
  const int chain[] = {7, 8};
  b.add_sequence(3, chain, 2, 10, true, false);
  const int ids[] = {1, 2, 3, 4};
  const int parent[] = {-1, 0, 0, 2};
  b.add_tree(1, ids, parent, 4, 5, true);
  return b;
}

// Group g of row r of a repacked matrix, for the three types the test uses.
void decode(DType t, const cuda::WeightPlanes& w, int64_t r, int64_t g, float* out) {
  if (t == DType::Q4_K) return cuda::decode_group<DType::Q4_K>(w, r, g, out);
  if (t == DType::Q8_0) return cuda::decode_group<DType::Q8_0>(w, r, g, out);
  return cuda::decode_group<DType::F16>(w, r, g, out);
}

}  // namespace

TEST(CudaStepInputs, RowsReadWhatTheCpuAttentionReads) {
  const ForwardBatch b = mixed_batch();
  std::map<int, std::vector<int>> tables{{3, {4, 9}}, {1, {2}}};
  const TableOf table_of = [&](int slot) -> const std::vector<int>& { return tables.at(slot); };
  const std::vector<float> inv_freq(4, 0.5f);
  StepInputs s;
  build_step_inputs(b, 0, b.size(), b.size(), 0, limits(), table_of, 99, inv_freq, s);
  ASSERT_EQ(s.n_seqs, 2);
  EXPECT_EQ(s.slots, (std::vector<int>{3, 1}));
  EXPECT_EQ(s.seq, (std::vector<int>{0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(s.pos, (std::vector<int>{10, 11, 5, 6, 6, 7}));
  EXPECT_EQ(s.kv_pos, (std::vector<int>{10, 11, 5, 6, 7, 8}));
  EXPECT_EQ(s.max_keys, 12);
  // Tables: each sequence's blocks, the rest (and the padding sequence's) the pad block.
  EXPECT_EQ(s.tables[0], 4);
  EXPECT_EQ(s.tables[1], 9);
  EXPECT_EQ(s.tables[2], 99);
  EXPECT_EQ(s.tables[8], 2);
  EXPECT_EQ(s.tables[16], 99);
  // Chain rows and the tree's root read their own positions.
  for (int r : {0, 1, 2})
    for (int p = 0; p <= s.pos[r]; ++p) EXPECT_EQ(device_physical(s, r, p), p);
  // The second child (row 4, logical 6) reads itself at physical 7; the
  // grandchild (row 5, logical 7) reads its parent at 7 and itself at 8.
  EXPECT_EQ(device_physical(s, 3, 6), 6);
  EXPECT_EQ(device_physical(s, 4, 5), 5);
  EXPECT_EQ(device_physical(s, 4, 6), 7);
  EXPECT_EQ(device_physical(s, 5, 5), 5);
  EXPECT_EQ(device_physical(s, 5, 6), 7);
  EXPECT_EQ(device_physical(s, 5, 7), 8);
  EXPECT_EQ(s.remap_stride, 2);  // the longest remapped path
}

TEST(CudaStepInputs, PaddingRowsTouchOnlyThePadBlock) {
  const ForwardBatch b = mixed_batch();
  std::map<int, std::vector<int>> tables{{3, {4, 9}}, {1, {2}}};
  const TableOf table_of = [&](int slot) -> const std::vector<int>& { return tables.at(slot); };
  const std::vector<float> inv_freq(4, 0.5f);
  StepInputs s;
  build_step_inputs(b, 0, b.size(), 16, 8, limits(), table_of, 99, inv_freq, s);
  EXPECT_EQ(s.rows, 6);
  EXPECT_EQ(s.padded_rows, 16);
  EXPECT_EQ(s.remap_stride, 8);  // a graph's fixed stride
  for (int r = 6; r < 16; ++r) {
    EXPECT_EQ(s.seq[r], 2);  // the padding sequence
    EXPECT_EQ(s.pos[r], 0);
    EXPECT_EQ(s.kv_pos[r], 0);
    EXPECT_EQ(device_physical(s, r, 0), 0);
  }
  for (int i = 0; i < 8; ++i) EXPECT_EQ(s.tables[size_t(2) * 8 + i], 99);
  // The grandchild's remap is the same at either stride.
  EXPECT_EQ(device_physical(s, 5, 6), 7);
  EXPECT_EQ(device_physical(s, 5, 7), 8);
}

TEST(CudaStepInputs, RefusesPassesBeyondTheLimits) {
  const ForwardBatch b = mixed_batch();
  std::map<int, std::vector<int>> tables{{3, std::vector<int>(9, 0)}, {1, {2}}};
  const TableOf table_of = [&](int slot) -> const std::vector<int>& { return tables.at(slot); };
  const std::vector<float> inv_freq(4, 0.5f);
  StepInputs s;
  EXPECT_NE(test::error_of([&] {
              build_step_inputs(b, 0, b.size(), b.size(), 0, limits(), table_of, 99, inv_freq, s);
            }).find("more than the 8 a context holds"),
            std::string::npos);
  tables[3] = {4, 9};
  EXPECT_NE(test::error_of([&] {
              build_step_inputs(b, 0, b.size(), 64, 0, limits(), table_of, 99, inv_freq, s);
            }).find("exceeds 32"),
            std::string::npos);
}

// Rows [begin, end) of a repacked matrix decode to the same values as those
// rows of the original.
TEST(CudaMatrixRows, DecodeToTheRowsOfTheMatrix) {
  for (DType t : {DType::Q4_K, DType::Q8_0, DType::F16}) {
    const int64_t k = 256, n = 12;
    const test::RandomMatrix w = test::random_matrix(t, k, n, 5);
    const std::vector<uint8_t>& ggml = w.bytes;
    const cuda::WeightLayout layout = cuda::plan_weight_layout(t, k, n);
    std::vector<uint8_t> dev(layout.total_bytes);
    cuda::repack_weights(layout, ggml.data(), dev.data());
    cuda::DeviceMatrix m{layout, dev.data()};
    const cuda::DeviceMatrix part = matrix_rows(m, 5, 9);
    ASSERT_EQ(part.layout.n, 4);
    const cuda::WeightPlanes planes = cuda::weight_planes(part.layout, part.data);
    std::vector<float> want(k), got(k);
    for (int64_t r = 0; r < 4; ++r) {
      dequantize_row(t, ggml.data() + (5 + r) * dtype_row_bytes(t, k), want.data(), k);
      for (int64_t g = 0; g < k / cuda::kGroup; ++g)
        decode(t, planes, r, g, &got[g * cuda::kGroup]);
      EXPECT_EQ(want, got) << dtype_name(t) << " row " << r;
    }
  }
}

TEST(CudaDeviceChoice, CpuNeedsNothingAndCudaSaysWhyItCannotRun) {
  EXPECT_FALSE(forward_pass_factory(Device::Cpu));
  EXPECT_NE(test::error_of([] { parse_device("tpu"); }).find("--device: 'tpu' is not a device"),
            std::string::npos);
  const std::string why = cuda_unavailable_reason();
#if defined(TANDEM_HAVE_CUDA)
  if (!why.empty()) {
    EXPECT_EQ(why, "--device cuda: no CUDA device found");
  }
#else
  EXPECT_EQ(why, "--device cuda: this build has no CUDA kernels (configure with -DTANDEM_CUDA=ON)");
#endif
  if (why.empty()) GTEST_SKIP() << "a CUDA device is present: nothing to refuse";
  EXPECT_EQ(test::error_of([] { forward_pass_factory(Device::Cuda); }), why);
}
