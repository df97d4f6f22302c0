// The CUDA paged attention against the reference attention: F32 and F16
// caches, grouped-query heads, blocks scattered through the pool by a block
// table, contexts of one chunk and of several (the split-K path); each row's
// result bit-identical alone and in a batch; a drafted tree's rows read through
// their position remaps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "cuda/attention_plan.h"
#include "cuda/cuda_kernels.h"
#include "cuda_test_util.h"
#include "kernels/ref/ref_kernels.h"
#include "quant/quants.h"
#include "support/random_weights.h"

using namespace tandem;
using namespace tandem::cuda;

namespace {

constexpr int kBlock = 16, kHeads = 8, kKvHeads = 2;

struct Case {
  DType kv_type;
  int head_dim;
};

// Two sequences in one pool of blocks, their blocks shuffled: sequence 0 with
// 40 positions (one chunk), sequence 1 with 700 (three chunks).
struct PagedCache {
  int head_dim, row_elems, n_blocks, table_stride;
  std::vector<uint8_t> k_pool, v_pool;  // host copies, `kv_type` rows
  std::vector<int> tables;              // 2 x table_stride
  float vmax = 0;                       // largest |v|
  size_t row_bytes;
};

PagedCache make_cache(DType t, int hd, const int lengths[2]) {
  PagedCache c;
  c.head_dim = hd;
  c.row_elems = kKvHeads * hd;
  c.row_bytes = dtype_row_bytes(t, c.row_elems);
  const int b0 = (lengths[0] + kBlock - 1) / kBlock, b1 = (lengths[1] + kBlock - 1) / kBlock;
  c.n_blocks = b0 + b1;
  c.table_stride = std::max(b0, b1);
  std::vector<int> perm(c.n_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(4));
  c.tables.assign(2 * c.table_stride, -1);
  for (int b = 0; b < b0; ++b) c.tables[b] = perm[b];
  for (int b = 0; b < b1; ++b) c.tables[c.table_stride + b] = perm[b0 + b];
  const int64_t elems = int64_t{c.n_blocks} * kBlock * c.row_elems;
  const std::vector<float> k = test::random_floats(elems, 5), v = test::random_floats(elems, 6);
  c.k_pool.resize(elems / c.row_elems * c.row_bytes);
  c.v_pool.resize(c.k_pool.size());
  quantize_row(t, k.data(), c.k_pool.data(), elems);
  quantize_row(t, v.data(), c.v_pool.data(), elems);
  for (float x : v) c.vmax = std::max(c.vmax, std::fabs(x));
  return c;
}

class CudaAttention : public test::CudaDeviceTestWithParam<Case> {};

TEST_P(CudaAttention, MatchesTheReferenceAndIsBatchInvariant) {
  const DType t = GetParam().kv_type;
  const int hd = GetParam().head_dim;
  const int lengths[2] = {40, 700};
  const PagedCache c = make_cache(t, hd, lengths);
  // Verify rows of sequence 0 (positions 35..39) and of sequence 1 (200, and 695..699).
  const std::vector<int> seq = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
  const std::vector<int> pos = {35, 36, 37, 38, 39, 200, 695, 696, 697, 698, 699};
  const int rows = static_cast<int>(seq.size());
  const int q_elems = kHeads * hd;
  const std::vector<float> q = test::random_floats(int64_t{rows} * q_elems, 7);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const AttentionDims dims{kHeads, kKvHeads, hd, scale};

  DeviceBuffer dk = test::to_device(c.k_pool), dv = test::to_device(c.v_pool);
  DeviceBuffer dq = test::to_device(q), dseq = test::to_device(seq), dpos = test::to_device(pos);
  DeviceBuffer dtab = test::to_device(c.tables), dout(sizeof(float) * rows * q_elems);
  DeviceBuffer scratch(sizeof(float) * attention_scratch_floats(rows, kHeads, hd, 700));
  const PagedKV kv{dk.data(), dv.data(), t, kBlock};
  AttentionArgs a{dq.as<float>(), dout.as<float>(), rows, dseq.as<int>(),     dpos.as<int>(),
                  dtab.as<int>(), c.table_stride,   700,  scratch.as<float>()};
  paged_attention(a, kv, dims, nullptr);
  const std::vector<float> got = test::from_device<float>(dout, rows * q_elems);

  // The reference reads the same blocks through a KVSeqView per sequence.
  ThreadPool pool(1);
  const kernels::AttentionShape shape{kHeads, kKvHeads, hd, scale};
  std::vector<float> want(got.size());
  for (int s = 0; s < 2; ++s) {
    std::vector<const void*> kb, vb;
    for (int b = 0; b < c.table_stride && c.tables[s * c.table_stride + b] >= 0; ++b) {
      const size_t off =
          static_cast<size_t>(c.tables[s * c.table_stride + b]) * kBlock * c.row_bytes;
      kb.push_back(c.k_pool.data() + off);
      vb.push_back(c.v_pool.data() + off);
    }
    KVSeqView view;
    view.k_blocks = kb.data();
    view.v_blocks = vb.data();
    view.block_size = kBlock;
    view.type = t;
    for (int r = 0; r < rows; ++r) {
      if (seq[r] != s) continue;
      kernels::ref::attention(&q[r * q_elems], 1, &pos[r], view, shape, &want[r * q_elems], pool);
    }
  }
  // The output is a convex combination of V rows; the scores' rounding (head_dim
  // products), expf's 2 ulps and the sums over up to 700 keys in another order
  // (at most 700 ulps, 4.2e-5) keep it within 1e-4 of V's scale.
  const double tol = 1e-4 * c.vmax;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << i;

  // Each row alone (its own max_keys, so a different grid) gives the same bits.
  for (int r = 0; r < rows; ++r) {
    DeviceBuffer one(sizeof(float) * q_elems);
    AttentionArgs alone = a;
    alone.q = dq.as<float>() + r * q_elems;
    alone.out = one.as<float>();
    alone.rows = 1;
    alone.seq = dseq.as<int>() + r;
    alone.pos = dpos.as<int>() + r;
    alone.max_keys = pos[r] + 1;
    paged_attention(alone, kv, dims, nullptr);
    const std::vector<float> y = test::from_device<float>(one, q_elems);
    EXPECT_EQ(std::memcmp(y.data(), &got[r * q_elems], q_elems * sizeof(float)), 0) << "row " << r;
  }
}

// A drafted tree stored side by side after a 690-position prefix (physical
// positions 690..699): each node row reads its ancestors through its remap, as
// the reference does through KVSeqView's.
TEST_P(CudaAttention, TreeRowsReadTheirAncestorsThroughTheRemap) {
  const DType t = GetParam().kv_type;
  const int hd = GetParam().head_dim;
  const int lengths[2] = {40, 700};
  const PagedCache c = make_cache(t, hd, lengths);
  const int from = 690, stride = 5;
  // Node rows: logical position, then the physical rows of logical from, from + 1, ...
  const std::vector<std::vector<int>> nodes = {
      {690, 693, 696}, {691, 697}, {690, 692, 695, 698, 699}};
  const int rows = static_cast<int>(nodes.size());
  std::vector<int> seq(rows, 1), pos(rows), remap(rows * stride, -1), remap_from(rows, from);
  for (int r = 0; r < rows; ++r) {
    pos[r] = from + static_cast<int>(nodes[r].size()) - 1;
    std::copy(nodes[r].begin(), nodes[r].end(), remap.begin() + r * stride);
  }
  const int q_elems = kHeads * hd;
  const std::vector<float> q = test::random_floats(int64_t{rows} * q_elems, 8);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  DeviceBuffer dk = test::to_device(c.k_pool), dv = test::to_device(c.v_pool);
  DeviceBuffer dq = test::to_device(q), dseq = test::to_device(seq), dpos = test::to_device(pos);
  DeviceBuffer dtab = test::to_device(c.tables), dout(sizeof(float) * rows * q_elems);
  DeviceBuffer dremap = test::to_device(remap), dfrom = test::to_device(remap_from);
  const int max_keys = from + stride;
  DeviceBuffer scratch(sizeof(float) * attention_scratch_floats(rows, kHeads, hd, max_keys));
  AttentionArgs a{dq.as<float>(),   dout.as<float>(), rows,
                  dseq.as<int>(),   dpos.as<int>(),   dtab.as<int>(),
                  c.table_stride,   max_keys,         scratch.as<float>(),
                  dremap.as<int>(), dfrom.as<int>(),  stride};
  paged_attention(a, PagedKV{dk.data(), dv.data(), t, kBlock}, {kHeads, kKvHeads, hd, scale},
                  nullptr);
  const std::vector<float> got = test::from_device<float>(dout, rows * q_elems);

  std::vector<const void*> kb, vb;
  for (int b = 0; b < c.table_stride; ++b) {
    const size_t off = static_cast<size_t>(c.tables[c.table_stride + b]) * kBlock * c.row_bytes;
    kb.push_back(c.k_pool.data() + off);
    vb.push_back(c.v_pool.data() + off);
  }
  ThreadPool pool(1);
  for (int r = 0; r < rows; ++r) {
    KVSeqView view;
    view.k_blocks = kb.data();
    view.v_blocks = vb.data();
    view.block_size = kBlock;
    view.type = t;
    view.remap = &remap[r * stride];
    view.remap_from = from;
    std::vector<float> want(q_elems);
    kernels::ref::attention(&q[r * q_elems], 1, &pos[r], view, {kHeads, kKvHeads, hd, scale},
                            want.data(), pool);
    // As above: 1e-4 of V's scale.
    for (int i = 0; i < q_elems; ++i)
      ASSERT_NEAR(got[r * q_elems + i], want[i], 1e-4 * c.vmax) << "row " << r << " value " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(CacheTypesAndHeads, CudaAttention,
                         ::testing::Values(Case{DType::F32, 64}, Case{DType::F16, 64},
                                           Case{DType::F16, 128}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.kv_type)) + "_head" +
                                  std::to_string(info.param.head_dim);
                         });

}  // namespace
