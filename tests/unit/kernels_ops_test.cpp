// The SIMD attention and elementwise kernels against the scalar reference, the
// attention's batch invariance (bit-exact per query row whatever rows share the
// call), and the thread pool.
#include "kernels/cpu/hwy_targets.h"  // first: the same Highway targets as the kernels

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cache/contiguous_kv_cache.h"
#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/ref/ref_kernels.h"
#include "quant/quants.h"

using namespace tandem;

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& e : v) e = dist(rng);
  return v;
}

// The SIMD kernels of `target` (0: this CPU's best) on `pool`, with scratch for
// the attention calls of these tests (heads of up to 128, groups of up to 6).
std::unique_ptr<kernels::Kernels> simd(ThreadPool& pool, int64_t target = 0) {
  return kernels::Kernels::create({.simd_target = target}, pool, {.head_dim = 128, .max_group = 6});
}

// A one-layer cache holding `len` random positions.
struct FilledCache {
  ContiguousKVCache cache;
  int slot;
  FilledCache(KVCacheShape shape, int len, DType type) : cache(shape, 1, len, type) {
    slot = cache.allocate();
    cache.reserve(slot, len);
    auto k = randn(size_t(len) * shape.row_elems(), 1), v = randn(k.size(), 2);
    for (int p = 0; p < len; ++p)
      cache.store(slot, 0, p, &k[size_t(p) * shape.row_elems()], &v[size_t(p) * shape.row_elems()]);
    cache.set_length(slot, len);
  }
};

class AttentionTest : public ::testing::TestWithParam<DType> {};

// Online softmax reorders the reference's sums and rescales partial results:
// each output is a convex combination of V values (|v| <~ 5 here), formed with
// a few hundred float operations, so 1e-4 absolute leaves ample room over the
// ~1e-6 actually seen while catching any wrong weight or position (errors of
// order 0.1). The last n_q positions of a cache of len attend.
void expect_attention_matches_reference(int n_kv, int n_heads, int hd, int n_q, int len, DType type,
                                        int64_t target = 0) {
  const KVCacheShape shape{1, n_kv, hd};
  FilledCache fc(shape, len, type);
  const kernels::AttentionShape ash{n_heads, n_kv, hd, 1.0f / std::sqrt(float(hd))};
  auto q = randn(size_t(n_q) * n_heads * hd, 3);
  std::vector<int> pos(n_q);
  for (int i = 0; i < n_q; ++i) pos[i] = len - n_q + i;
  std::vector<float> fast(q.size()), ref(q.size());
  ThreadPool pool(2);
  simd(pool, target)
      ->attention(q.data(), n_q, pos.data(), fc.cache.view(fc.slot, 0), ash, fast.data());
  kernels::ref::attention(q.data(), n_q, pos.data(), fc.cache.view(fc.slot, 0), ash, ref.data(),
                          pool);
  for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 1e-4f) << "element " << i;
}

TEST_P(AttentionTest, MatchesReference) {
  // 77: key blocks of 32 plus a ragged end; 6 heads over 2: pairs of rows share a score pass.
  expect_attention_matches_reference(2, 6, 64, 5, 77, GetParam());
}

TEST_P(AttentionTest, MatchesReferenceAtQwenShape) {
  // Qwen2.5-1.5B's heads (12 over 2, 128 wide), a verify pass of 7 rows.
  expect_attention_matches_reference(2, 12, 128, 7, 301, GetParam());
}

TEST_P(AttentionTest, MatchesReferenceWithHeadDimOffTheVectorWidth) {
  // 40 values per head: the keys take the transposition one value at a time
  // and every vector loop has a tail.
  expect_attention_matches_reference(1, 3, 40, 4, 45, GetParam());
}

// Each query row's output, computed with 19 other rows (pairs of rows share score
// passes, two tiles of rows), equals the row computed alone, bit for bit.
void expect_rows_bit_identical_alone_or_together(DType type, int64_t target = 0) {
  const KVCacheShape shape{1, 2, 64};
  const int n_heads = 4, len = 70;
  FilledCache fc(shape, len, type);
  const kernels::AttentionShape ash{n_heads, 2, 64, 0.125f};
  const int n_q = 20;  // more than one tile of query rows
  auto q = randn(size_t(n_q) * n_heads * 64, 4);
  std::vector<int> pos(n_q);
  for (int i = 0; i < n_q; ++i) pos[i] = 50 + i;
  const size_t stride = size_t(n_heads) * 64;
  std::vector<float> all(q.size()), one(stride);
  ThreadPool pool(2);
  auto k = simd(pool, target);
  k->attention(q.data(), n_q, pos.data(), fc.cache.view(fc.slot, 0), ash, all.data());
  for (int i = 0; i < n_q; ++i) {
    k->attention(&q[i * stride], 1, &pos[i], fc.cache.view(fc.slot, 0), ash, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), &all[i * stride], stride * sizeof(float))) << "row " << i;
  }
}

TEST_P(AttentionTest, RowsBitIdenticalAloneOrTogether) {
  expect_rows_bit_identical_alone_or_together(GetParam());
}

// A remapped view (logical positions from remap_from on read scattered physical
// rows, in blocks of 8) gives the bits of a view whose rows were gathered into
// place beforehand, with the SIMD kernels of `target` and the reference: only
// the rows' addresses differ, so the arithmetic is the same.
void expect_remap_same_as_gathered(DType type, int64_t target = 0) {
  const KVCacheShape shape{1, 2, 64};
  const int n_heads = 4, len = 90, remap_from = 37, n_q = 13;
  const kernels::AttentionShape ash{n_heads, 2, 64, 0.125f};
  FilledCache scattered(shape, len, type);  // rows from randn(..., 1) and randn(..., 2)
  std::vector<int> remap(n_q);              // distinct physical positions in [remap_from, len)
  std::mt19937 rng(9);
  std::vector<int> free_rows;
  for (int p = remap_from; p < len; ++p) free_rows.push_back(p);
  std::shuffle(free_rows.begin(), free_rows.end(), rng);
  std::copy_n(free_rows.begin(), n_q, remap.begin());
  const size_t re = shape.row_elems();
  auto k = randn(size_t(len) * re, 1), v = randn(k.size(), 2);
  ContiguousKVCache gathered(shape, 1, len, type);
  const int g = gathered.allocate();
  gathered.reserve(g, remap_from + n_q);
  for (int p = 0; p < remap_from + n_q; ++p) {
    const int from = p < remap_from ? p : remap[p - remap_from];
    gathered.store(g, 0, p, &k[from * re], &v[from * re]);
  }
  gathered.set_length(g, remap_from + n_q);
  // The scattered cache seen in blocks of 8 rows, through the remap.
  const KVSeqView whole = scattered.cache.view(scattered.slot, 0);
  const size_t row_bytes = dtype_row_bytes(type, int(re));
  std::vector<const void*> kb, vb;
  for (int b = 0; b * 8 < len; ++b) {
    kb.push_back(static_cast<const uint8_t*>(whole.k_blocks[0]) + b * 8 * row_bytes);
    vb.push_back(static_cast<const uint8_t*>(whole.v_blocks[0]) + b * 8 * row_bytes);
  }
  KVSeqView view{kb.data(), vb.data(), 8, type};
  view.remap = remap.data();
  view.remap_from = remap_from;

  auto q = randn(size_t(n_q) * n_heads * 64, 5);
  std::vector<int> pos(n_q);
  for (int i = 0; i < n_q; ++i) pos[i] = remap_from + i;
  pos[2] = 3;  // a row that stops before the remap
  std::vector<float> a(q.size()), b(q.size());
  ThreadPool pool(2);
  auto kern = simd(pool, target);
  kern->attention(q.data(), n_q, pos.data(), view, ash, a.data());
  kern->attention(q.data(), n_q, pos.data(), gathered.view(g, 0), ash, b.data());
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "SIMD kernels";
  kernels::ref::attention(q.data(), n_q, pos.data(), view, ash, a.data(), pool);
  kernels::ref::attention(q.data(), n_q, pos.data(), gathered.view(g, 0), ash, b.data(), pool);
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "reference kernels";
}

TEST_P(AttentionTest, RemapReadsWhatGatheredKeysGive) { expect_remap_same_as_gathered(GetParam()); }

// attention_batch over several sequences (one row, a verify pass, more rows
// than a tile, a remapped view) gives each call's bits as attention() alone,
// with the SIMD kernels of `target` and with the reference (one call each).
void expect_batch_same_as_alone(DType type, int64_t target = 0) {
  const KVCacheShape shape{1, 2, 64};
  const int n_heads = 4;
  const kernels::AttentionShape ash{n_heads, 2, 64, 0.125f};
  const size_t stride = size_t(n_heads) * 64;
  const int lens[] = {40, 77, 90, 61};
  const int rows[] = {1, 6, 19, 3};
  std::vector<std::unique_ptr<FilledCache>> caches;
  std::vector<std::vector<float>> qs;
  std::vector<std::vector<int>> pos;
  for (int s = 0; s < 4; ++s) {
    caches.push_back(std::make_unique<FilledCache>(shape, lens[s], type));
    qs.push_back(randn(rows[s] * stride, 20 + s));
    pos.emplace_back(rows[s]);
    for (int i = 0; i < rows[s]; ++i) pos[s][i] = lens[s] - rows[s] + i;
  }
  // The last sequence reads its last 3 positions in reverse physical order.
  const std::vector<int> remap = {lens[3] - 1, lens[3] - 2, lens[3] - 3};
  ThreadPool pool(2);
  auto simd_k = simd(pool, target);
  auto ref_k =
      kernels::Kernels::create({.reference = true}, pool, {.head_dim = 128, .max_group = 6});
  for (kernels::Kernels* k : {simd_k.get(), ref_k.get()}) {
    std::vector<kernels::AttentionCall> calls;
    std::vector<std::vector<float>> together(4);
    for (int s = 0; s < 4; ++s) {
      together[s].assign(rows[s] * stride, 0.0f);
      KVSeqView kv = caches[s]->cache.view(caches[s]->slot, 0);
      if (s == 3) {
        kv.remap = remap.data();
        kv.remap_from = lens[3] - 3;
      }
      calls.push_back({qs[s].data(), rows[s], pos[s].data(), kv, together[s].data()});
    }
    k->attention_batch(calls.data(), 4, ash);
    for (int s = 0; s < 4; ++s) {
      std::vector<float> alone(rows[s] * stride);
      k->attention(qs[s].data(), rows[s], pos[s].data(), calls[s].kv, ash, alone.data());
      ASSERT_EQ(0, std::memcmp(alone.data(), together[s].data(), alone.size() * sizeof(float)))
          << k->name() << ", sequence " << s;
    }
  }
}

TEST_P(AttentionTest, BatchOfSequencesBitIdenticalToEachAlone) {
  expect_batch_same_as_alone(GetParam());
}

TEST(Attention, BatchRejectsACallWithoutRows) {
  ThreadPool pool(1);
  auto k = simd(pool);
  FilledCache fc({1, 2, 64}, 8, DType::F16);
  const kernels::AttentionShape ash{4, 2, 64, 0.125f};
  std::vector<float> q(4 * 64), out(q.size());
  const int pos = 7;
  kernels::AttentionCall calls[] = {{q.data(), 1, &pos, fc.cache.view(fc.slot, 0), out.data()},
                                    {q.data(), 0, &pos, fc.cache.view(fc.slot, 0), out.data()}};
  EXPECT_THROW(k->attention_batch(calls, 2, ash), Error);
}

INSTANTIATE_TEST_SUITE_P(CacheTypes, AttentionTest, ::testing::Values(DType::F16, DType::F32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Every Highway target this build compiled and this machine supports: AVX-512
// transposes keys in registers and scores six pairs at once, narrower targets
// transpose one value at a time and score four.
class AttentionEveryTarget : public ::testing::TestWithParam<int64_t> {};

TEST_P(AttentionEveryTarget, MatchesReferenceAndIsBatchInvariant) {
  ThreadPool pool(1);
  ASSERT_STREQ(hwy::TargetName(GetParam()), simd(pool, GetParam())->name());
  expect_attention_matches_reference(2, 12, 128, 7, 301, DType::F16, GetParam());
  expect_attention_matches_reference(1, 3, 40, 4, 45, DType::F32, GetParam());
  expect_rows_bit_identical_alone_or_together(DType::F16, GetParam());
  expect_remap_same_as_gathered(DType::F16, GetParam());
  expect_remap_same_as_gathered(DType::F32, GetParam());
  expect_batch_same_as_alone(DType::F16, GetParam());
}

INSTANTIATE_TEST_SUITE_P(CompiledAndSupported, AttentionEveryTarget,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         [](const auto& info) { return std::string(hwy::TargetName(info.param)); });

// Elementwise ops differ from the reference only by summation order (RMSNorm's
// sum of squares over 1000 values: relative error below ~1e-5) and by Highway's
// exp (a few ulp): relative 1e-5 with a small absolute floor.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], 1e-5f * std::fabs(b[i]) + 1e-6f) << what << " element " << i;
}

TEST(Elementwise, MatchReference) {
  const int n = 1003;  // not a multiple of any vector length: exercises the tails
  auto x = randn(n, 5, 3.0f), w = randn(n, 6), g = randn(n, 7, 4.0f);
  std::vector<float> a(n), b(n);
  ThreadPool pool(1);
  auto k = simd(pool);
  k->rmsnorm(x.data(), w.data(), n, 1e-6f, a.data());
  kernels::ref::rmsnorm(x.data(), w.data(), n, 1e-6f, b.data());
  expect_close(a, b, "rmsnorm");
  k->swiglu(g.data(), x.data(), n, a.data());
  kernels::ref::swiglu(g.data(), x.data(), n, b.data());
  expect_close(a, b, "swiglu");
  a = x;
  b = x;
  k->add_inplace(a.data(), w.data(), n);
  kernels::ref::add_inplace(b.data(), w.data(), n);
  EXPECT_EQ(a, b);  // one rounding per element either way
}

TEST(Elementwise, ArgmaxFindsTheFirstMaximumAnywhereAndReportsNaN) {
  // A vocabulary-sized row (not a multiple of any vector width) with the
  // maximum placed in the vector part, in the scalar tail, tied, and with
  // infinities and NaN about: the vector kernel must agree with the scalar one.
  const int n = 151936 + 7;
  auto x = randn(n, 21);
  for (int at : {0, 5, 4099, n - 9, n - 1}) {
    auto y = x;
    y[at] = 100.0f;
    EXPECT_EQ(kernels::cpu::argmax(y.data(), n), at);
    y[n - 3] = 100.0f;  // a later tie does not win
    EXPECT_EQ(kernels::cpu::argmax(y.data(), n), std::min(at, n - 3));
    EXPECT_EQ(kernels::cpu::argmax(y.data(), n), kernels::ref::argmax(y.data(), n));
  }
  auto y = x;
  y[17] = -INFINITY;
  y[40] = INFINITY;
  EXPECT_EQ(kernels::cpu::argmax(y.data(), n), 40);
  std::vector<float> all_low(33, -INFINITY);
  EXPECT_EQ(kernels::cpu::argmax(all_low.data(), 33), 0);  // as the scalar scan: the first
  for (int at : {3, n - 2}) {
    y = x;
    y[at] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(kernels::cpu::argmax(y.data(), n), -1) << "NaN at " << at;
    EXPECT_EQ(kernels::ref::argmax(y.data(), n), -1) << "NaN at " << at;
  }
}

// A softmax's denominator over a vocabulary-sized row (not a multiple of any
// vector width): against a double-precision scalar sum. Tolerance 1e-5
// relative: the float terms (exp to a few ulp) and the float sum of ~150,000
// terms of at most 1 (each addition's error ~6e-8 of the running total, over
// 4 x 16 accumulators and a short tail) stay well inside it.
TEST(Elementwise, SumExpMatchesADoubleSumAndIgnoresMinusInfinity) {
  const int n = 151936 + 7;
  auto x = randn(n, 31);
  for (float& v : x) v *= 4.0f;  // logits of a few units either way
  x[n - 2] = 9.0f;               // the largest, in the scalar tail
  x[100] = -INFINITY;            // a token the output ranges exclude
  for (float scale : {1.0f, 1.0f / 0.7f}) {
    double want = 0;
    for (int i = 0; i < n; ++i) want += std::exp((static_cast<double>(x[i]) - 9.0) * scale);
    const float got = kernels::cpu::sum_exp(x.data(), n, 9.0f, scale);
    EXPECT_NEAR(got, want, 1e-5 * want) << "scale " << scale;
  }
  // Terms below the smallest normal float add nothing; a lone term of 1 is 1.
  std::vector<float> one_peak(33, -200.0f);
  one_peak[32] = 0.0f;
  EXPECT_FLOAT_EQ(kernels::cpu::sum_exp(one_peak.data(), 33, 0.0f, 1.0f), 1.0f);
  one_peak[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(kernels::cpu::sum_exp(one_peak.data(), 33, 0.0f, 1.0f)));
}

TEST(Elementwise, RopeMatchesReference) {
  // Same cos/sin and the same two products per output; only a fused multiply-add
  // may round differently: |x| < 5, so 1e-6 absolute is a few ulp.
  std::vector<float> inv_freq(32);
  for (int i = 0; i < 32; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * i / 64.0f);
  ThreadPool pool(1);
  auto k = simd(pool);
  for (auto style : {kernels::RopeStyle::Normal, kernels::RopeStyle::NeoX}) {
    auto a = randn(3 * 64, 8), b = a;
    std::vector<float> cos(32), sin(32);
    kernels::rope_angles(417, inv_freq.data(), 32, cos.data(), sin.data());
    k->rope(a.data(), 3, 64, cos.data(), sin.data(), style);
    kernels::ref::rope(b.data(), 3, 64, cos.data(), sin.data(), style);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6f) << "element " << i;
  }
}

TEST(ThreadPool, RunsEveryChunkOnceAcrossManyRegions) {
  ThreadPool pool(2);
  std::vector<int> hits(1000);
  for (int rep = 0; rep < 2000; ++rep)
    pool.parallel_for(1000, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) ++hits[i];
    });
  for (int h : hits) ASSERT_EQ(h, 2000);
  // Self-scheduled work: every item claimed exactly once, whoever joins.
  std::vector<std::atomic<int>> items(5000);
  std::atomic<int> next{0};
  pool.run_self_scheduled([&](int) {
    for (int i; (i = next.fetch_add(1)) < 5000;) items[i].fetch_add(1);
  });
  for (auto& it : items) ASSERT_EQ(it.load(), 1);
}

// run_chunks: every chunk once; each thread's own contiguous run first and in
// order (one stream of memory per thread), other runs only after its own is
// empty. Many regions, so that workers join late in some of them.
TEST(ThreadPool, RunChunksGivesEachThreadItsOwnRunFirstAndInOrder) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 5, 97, 1000}) {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::vector<std::vector<int64_t>> taken(threads);  // each written by its thread only
        pool.run_chunks(n, [&](int64_t i, int t) {
          hits[i].fetch_add(1);
          taken[t].push_back(i);
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[i].load(), 1) << threads << " threads, " << n << " chunks, chunk " << i;
        for (int t = 0; t < threads; ++t) {
          const int64_t begin = n * t / threads, end = n * (t + 1) / threads;
          bool helping = false;  // took a chunk of another thread's run
          int64_t last_own = -1;
          for (int64_t i : taken[t]) {
            const bool own = i >= begin && i < end;
            ASSERT_FALSE(own && helping) << "thread " << t << " went back to its run at " << i;
            if (own) {
              ASSERT_GT(i, last_own) << "thread " << t << " took its run out of order";
              last_own = i;
            }
            helping |= !own;
          }
        }
      }
    }
  }
}

TEST(ScratchBuffer, GrowsAtLeastTwofoldAndOnlyWhenItMust) {
  AlignedVector<float> v;
  resize_scratch(v, 100);
  EXPECT_EQ(v.size(), 100u);
  const size_t capacity = v.capacity();
  const float* storage = v.data();
  resize_scratch(v, 10);
  resize_scratch(v, capacity);
  EXPECT_EQ(v.size(), capacity);
  EXPECT_EQ(v.data(), storage) << "within its capacity a buffer keeps its storage";
  resize_scratch(v, capacity + 1);
  EXPECT_EQ(v.size(), capacity + 1);
  EXPECT_GE(v.capacity(), 2 * capacity) << "growth at least doubles: rare reallocations";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u);
}

TEST(ThreadPool, PropagatesExceptionsFromAnyThread) {
  ThreadPool pool(2);
  // The second chunk may run on the worker or the caller; either way it reaches us.
  EXPECT_THROW(pool.parallel_for(2,
                                 [](int64_t b, int64_t, int) {
                                   if (b == 1) throw std::runtime_error("chunk failed");
                                 }),
               std::runtime_error);
  int calls = 0;
  pool.parallel_for(
      10, [&](int64_t, int64_t, int) { ++calls; }, 100);  // still usable
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(pool.run_chunks(4,
                               [](int64_t i, int) {
                                 if (i == 3) throw std::runtime_error("chunk failed");
                               }),
               std::runtime_error);
  std::atomic<int> chunks{0};
  pool.run_chunks(4, [&](int64_t, int) { ++chunks; });  // still usable
  EXPECT_EQ(chunks.load(), 4);
}

}  // namespace
