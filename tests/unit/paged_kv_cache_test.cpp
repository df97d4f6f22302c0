// The paged KV cache: block accounting (reserve / truncate / free, running out,
// free-list reuse), misuse errors, forward passes bit-identical to the contiguous
// cache, and prefix caching (attach, publish, refcounts, LRU eviction, hash
// collisions, read-only shared blocks).
//
// Logits are compared bit for bit (memcmp, no tolerance): both caches store the
// same K/V values with the same quantize_row and the attention kernel reads them
// in position order whatever the block layout, and the kernels are batch
// invariant, so any difference at all is a cache bug.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <set>

#include "cache/contiguous_kv_cache.h"
#include "cache/paged_kv_cache.h"
#include "cache/prefix_index.h"
#include "core/error.h"
#include "model/model.h"
#include "model/transformer.h"
#include "quant/quants.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;

namespace {

const KVCacheShape kSmallShape{2, 2, 4};  // 2 layers, 8 values per row

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A slot that claims to hold `tokens` (for accounting tests, no K/V written).
int fake_prefill(PagedKVCache& c, const std::vector<int>& tokens) {
  int slot = c.allocate();
  EXPECT_GE(slot, 0);
  EXPECT_TRUE(c.reserve(slot, static_cast<int>(tokens.size())));
  c.set_length(slot, static_cast<int>(tokens.size()));
  return slot;
}

std::vector<int> first_blocks(const std::vector<int>& table, int n) {
  return {table.begin(), table.begin() + n};
}

}  // namespace

// ---------------------------------------------------------------- accounting

TEST(PagedKVCache, ReserveTruncateFreeAccounting) {
  PagedKVCache c(kSmallShape, 4, 10, 4, DType::F32);
  EXPECT_EQ(c.total_positions(), 40);
  EXPECT_EQ(c.free_positions(), 40);
  int a = c.allocate();
  EXPECT_EQ(c.capacity(a), 40);

  ASSERT_TRUE(c.reserve(a, 1));
  EXPECT_EQ(c.block_table(a).size(), 1u);
  EXPECT_EQ(c.free_positions(), 36);
  ASSERT_TRUE(c.reserve(a, 4));  // still within the first block
  EXPECT_EQ(c.block_table(a).size(), 1u);
  ASSERT_TRUE(c.reserve(a, 5));
  EXPECT_EQ(c.block_table(a).size(), 2u);
  EXPECT_EQ(c.free_positions(), 32);
  c.set_length(a, 5);
  EXPECT_EQ(c.length(a), 5);
  ASSERT_TRUE(c.reserve(a, 3));  // shrinking is not reserve's job
  EXPECT_EQ(c.block_table(a).size(), 2u);

  c.truncate_to(a, 4);  // position 4 was the only one in block 1
  EXPECT_EQ(c.length(a), 4);
  EXPECT_EQ(c.block_table(a).size(), 1u);
  EXPECT_EQ(c.free_positions(), 36);
  c.truncate_to(a, 1);  // block 0 still holds position 0
  EXPECT_EQ(c.block_table(a).size(), 1u);
  c.truncate_to(a, 0);
  EXPECT_EQ(c.block_table(a).size(), 0u);
  EXPECT_EQ(c.free_positions(), 40);

  ASSERT_TRUE(c.reserve(a, 13));  // 4 blocks, reserved but not yet written
  c.set_length(a, 9);
  c.truncate_to(a, 9);  // frees the reserved block wholly past the length
  EXPECT_EQ(c.block_table(a).size(), 3u);
  EXPECT_EQ(c.free_positions(), 28);

  auto st = c.stats();
  EXPECT_EQ(st.blocks_total, 10);
  EXPECT_EQ(st.blocks_used, 3);
  EXPECT_EQ(st.blocks_cached, 0);
  EXPECT_EQ(st.block_size, 4);

  c.free(a);
  EXPECT_EQ(c.free_positions(), 40);
  EXPECT_EQ(c.stats().blocks_used, 0);
}

TEST(PagedKVCache, RunningOutReturnsFalseAndChangesNothing) {
  PagedKVCache c(kSmallShape, 4, 10, 4, DType::F16);
  int a = c.allocate(), b = c.allocate();
  ASSERT_TRUE(c.reserve(a, 24));  // 6 blocks
  ASSERT_TRUE(c.reserve(b, 3));   // 1 block
  c.set_length(b, 3);
  const auto table_b = c.block_table(b);
  EXPECT_EQ(c.free_positions(), 12);

  EXPECT_FALSE(c.reserve(b, 20));  // needs 4 more blocks, 3 left
  EXPECT_EQ(c.block_table(b), table_b);
  EXPECT_EQ(c.length(b), 3);
  EXPECT_EQ(c.free_positions(), 12);
  EXPECT_FALSE(c.reserve(b, 41));  // beyond the whole pool
  EXPECT_EQ(c.free_positions(), 12);

  EXPECT_TRUE(c.reserve(b, 16));  // exactly the 3 remaining blocks
  EXPECT_EQ(c.free_positions(), 0);
  EXPECT_FALSE(c.reserve(a, 25));
  EXPECT_EQ(c.block_table(a).size(), 6u);
  c.free(a);
  EXPECT_EQ(c.free_positions(), 24);
}

TEST(PagedKVCache, FreedBlocksAreReused) {
  PagedKVCache c(kSmallShape, 2, 8, 2, DType::F32);
  int a = c.allocate();
  ASSERT_TRUE(c.reserve(a, 6));
  const auto table_a = c.block_table(a);
  std::set<int> blocks_a(table_a.begin(), table_a.end());
  EXPECT_EQ(blocks_a.size(), 3u);  // distinct blocks
  c.free(a);

  int b = c.allocate();
  ASSERT_TRUE(c.reserve(b, 6));
  const auto table_b = c.block_table(b);
  // The free list is a stack: the blocks just freed come back before untouched ones.
  EXPECT_EQ(std::set<int>(table_b.begin(), table_b.end()), blocks_a);

  // Truncate and regrow, as in speculative decoding: the freed block is the next one out.
  c.set_length(b, 6);
  int last = table_b.back();
  c.truncate_to(b, 4);
  EXPECT_EQ(c.block_refs(last), 0);
  ASSERT_TRUE(c.reserve(b, 5));
  EXPECT_EQ(c.block_table(b).back(), last);
}

TEST(PagedKVCache, ManyCheapSlots) {
  PagedKVCache c(kSmallShape, 256, 16, 16, DType::F16);
  std::set<int> slots;
  for (int i = 0; i < 256; ++i) slots.insert(c.allocate());
  EXPECT_EQ(slots.size(), 256u);
  EXPECT_EQ(*slots.begin(), 0);
  EXPECT_EQ(*slots.rbegin(), 255);
  EXPECT_EQ(c.allocate(), -1);
  EXPECT_EQ(c.free_positions(), 256);  // empty slots hold no storage
  c.free(17);
  EXPECT_EQ(c.allocate(), 17);
}

TEST(PagedKVCache, StoreAndViewAgreeOnLayout) {
  // Every (layer, position) gets distinct K and V rows; reading them back through
  // the views checks the block / row / layer / K-V addressing and that no write
  // lands on another's row. Values are small integers, exact in F16.
  for (DType type : {DType::F32, DType::F16}) {
    const int bs = 3, n = 11, re = kSmallShape.row_elems();
    PagedKVCache c(kSmallShape, 2, 8, bs, type);
    int other = c.allocate();
    ASSERT_TRUE(c.reserve(other, 5));  // so the slot's blocks are not 0, 1, 2...
    int s = c.allocate();
    ASSERT_TRUE(c.reserve(s, n));
    auto value = [&](int layer, int pos, int kv, int e) {
      return static_cast<float>(((layer * 16 + pos) * 2 + kv) * 8 + e);  // < 2048
    };
    std::vector<float> k(re), v(re);
    for (int l = 0; l < kSmallShape.n_layers; ++l)
      for (int p = 0; p < n; ++p) {
        for (int e = 0; e < re; ++e) k[e] = value(l, p, 0, e), v[e] = value(l, p, 1, e);
        c.store(s, l, p, k.data(), v.data());
      }
    c.set_length(s, n);
    const size_t row_bytes = dtype_row_bytes(type, re);
    for (int l = 0; l < kSmallShape.n_layers; ++l) {
      auto view = c.view(s, l);
      EXPECT_EQ(view.block_size, bs);
      EXPECT_EQ(view.type, type);
      for (int p = 0; p < n; ++p)
        for (int kv = 0; kv < 2; ++kv) {
          const void* const* blocks = kv == 0 ? view.k_blocks : view.v_blocks;
          const auto* row = static_cast<const uint8_t*>(blocks[p / bs]) + (p % bs) * row_bytes;
          std::vector<float> got(re);
          dequantize_row(type, row, got.data(), re);
          for (int e = 0; e < re; ++e)
            ASSERT_EQ(got[e], value(l, p, kv, e))
                << dtype_name(type) << " layer " << l << " pos " << p << " kv " << kv;
        }
    }
  }
}

TEST(PagedKVCache, ViewOfOneSlotSurvivesOtherSlotsChanges) {
  PagedKVCache c(kSmallShape, 3, 64, 2, DType::F32);
  int a = c.allocate(), b = c.allocate();
  ASSERT_TRUE(c.reserve(a, 7));
  auto view = c.view(a, 1);
  std::vector<const void*> before(view.k_blocks, view.k_blocks + 4);
  for (int n : {40, 3, 60, 0}) {  // grow, shrink and regrow another slot
    ASSERT_TRUE(c.reserve(b, n));
    c.set_length(b, n);
    c.truncate_to(b, n / 2);
  }
  c.free(b);
  EXPECT_EQ(std::vector<const void*>(view.k_blocks, view.k_blocks + 4), before);
  EXPECT_EQ(c.view(a, 1).k_blocks, view.k_blocks);
}

TEST(PagedKVCache, MisuseThrows) {
  EXPECT_THROW(PagedKVCache(kSmallShape, 1, 4, 4, DType::Q8_0), Error);
  EXPECT_THROW(PagedKVCache(kSmallShape, 0, 4, 4), Error);
  EXPECT_THROW(PagedKVCache(kSmallShape, 1, 0, 4), Error);
  EXPECT_THROW(PagedKVCache(kSmallShape, 1, 4, 0), Error);
  EXPECT_THROW(PagedKVCache(KVCacheShape{0, 2, 4}, 1, 4, 4), Error);
  EXPECT_THROW(PagedKVCache(kSmallShape, 1, 1 << 20, 1 << 12), Error);  // > INT_MAX positions

  PagedKVCache c(kSmallShape, 2, 4, 4, DType::F32);
  std::vector<float> row(kSmallShape.row_elems(), 1.0f);
  EXPECT_THROW(c.length(0), Error);  // not allocated yet
  EXPECT_THROW(c.reserve(-1, 1), Error);
  EXPECT_THROW(c.free(2), Error);
  int s = c.allocate();
  EXPECT_THROW(c.reserve(s, -1), Error);
  ASSERT_TRUE(c.reserve(s, 5));
  EXPECT_THROW(c.set_length(s, 9), Error);  // beyond the 8 reserved positions
  EXPECT_THROW(c.set_length(s, -1), Error);
  EXPECT_THROW(c.store(s, 0, 8, row.data(), row.data()), Error);
  EXPECT_THROW(c.store(s, 0, -1, row.data(), row.data()), Error);
  EXPECT_THROW(c.store(s, 2, 0, row.data(), row.data()), Error);  // layer
  EXPECT_THROW(c.view(s, -1), Error);
  c.set_length(s, 5);
  EXPECT_THROW(c.truncate_to(s, 6), Error);
  EXPECT_THROW(c.truncate_to(s, -1), Error);
  EXPECT_THROW(c.attach_prefix(s, {1, 2, 3, 4, 5, 6}), Error);   // slot not empty
  EXPECT_THROW(c.publish_prefix(s, {1, 2, 3, 4, 5, 6}), Error);  // only 5 positions held
  c.free(s);
  EXPECT_THROW(c.free(s), Error);
  EXPECT_THROW(c.view(s, 0), Error);
  EXPECT_THROW(c.block_refs(4), Error);
}

// ---------------------------------------------------------------- forward pass

namespace {

struct SyntheticModel {
  std::unique_ptr<Model> model;
  ThreadPool pool{2};
  std::unique_ptr<Transformer> tf;

  explicit SyntheticModel(const std::string& tag) {
    test::SyntheticSpec spec;
    spec.with_tokenizer = false;
    model = Model::load(test::write_synthetic_gguf(spec, test::temp_dir(tag) + "/m.gguf"));
    tf = std::make_unique<Transformer>(*model, pool);
  }
  int vocab() const { return tf->vocab_size(); }
};

// Runs a batch and appends its logits to `all`.
void run(Transformer& tf, KVCache& cache, const ForwardBatch& b, std::vector<float>& all) {
  std::vector<float> out(b.logit_rows.size() * size_t(tf.vocab_size()));
  tf.forward(b, cache, out.data());
  all.insert(all.end(), out.begin(), out.end());
}

// Several sequences sharing batches: chunked prefill, single-token decode steps,
// rejected drafts rolled back with truncate_to and recomputed, a slot freed and
// its storage reused. Returns every logit computed, in order.
std::vector<float> run_scenario(Transformer& tf, KVCache& cache) {
  const int V = tf.vocab_size();
  const auto A = test::pseudo_random_ids(37, V, 1), B = test::pseudo_random_ids(23, V, 2),
             C = test::pseudo_random_ids(50, V, 3), D = test::pseudo_random_ids(30, V, 4),
             decode = test::pseudo_random_ids(64, V, 5);
  size_t next = 0;
  auto take = [&](size_t n) {  // the next n decode tokens
    EXPECT_LE(next + n, decode.size());
    next += n;
    return &decode[next - n];
  };
  std::vector<float> all;
  ForwardBatch b;

  int a = cache.allocate(), sb = cache.allocate();
  b.add_sequence(a, A.data(), 10, 0, true, false);
  b.add_sequence(sb, B.data(), 13, 0, false, true);
  run(tf, cache, b, all);
  int c = cache.allocate();
  b.clear();
  b.add_sequence(a, &A[10], 27, 10, false, true);
  b.add_sequence(sb, &B[13], 10, 13, true, false);
  b.add_sequence(c, C.data(), 20, 0, false, true);
  run(tf, cache, b, all);
  b.clear();
  b.add_sequence(c, &C[20], 30, 20, true, false);
  run(tf, cache, b, all);

  auto decode_step = [&](std::vector<int> slots) {
    b.clear();
    for (int s : slots) b.add_sequence(s, take(1), 1, cache.length(s), false, true);
    run(tf, cache, b, all);
  };
  for (int step = 0; step < 6; ++step)
    decode_step(step % 2 ? std::vector<int>{c, a, sb} : std::vector<int>{sb, c, a});

  // A 4-token draft for sb and a 5-token one for a, mostly rejected.
  b.clear();
  b.add_sequence(sb, take(4), 4, cache.length(sb), true, false);
  b.add_sequence(a, take(5), 5, cache.length(a), true, false);
  run(tf, cache, b, all);
  cache.truncate_to(sb, cache.length(sb) - 3);
  cache.truncate_to(a, cache.length(a) - 5);
  decode_step({a, sb});
  decode_step({sb, c, a});

  // a ends; d takes its place (its storage, for the paged cache) in two chunks.
  cache.free(a);
  int d = cache.allocate();
  b.clear();
  b.add_sequence(d, D.data(), 17, 0, true, false);
  b.add_sequence(c, take(1), 1, cache.length(c), false, true);
  run(tf, cache, b, all);
  b.clear();
  b.add_sequence(c, take(1), 1, cache.length(c), false, true);
  b.add_sequence(d, &D[17], 13, 17, true, false);
  run(tf, cache, b, all);
  for (int step = 0; step < 4; ++step) decode_step({d, sb, c});
  cache.truncate_to(d, 20);  // a deep rollback across block boundaries
  decode_step({c, d});
  return all;
}

}  // namespace

class PagedMatchesContiguous : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(PagedMatchesContiguous, BitIdenticalLogits) {
  const auto [bs, type] = GetParam();
  SyntheticModel m("paged_eq");
  ContiguousKVCache contiguous(m.tf->cache_shape(), 4, 128, type);
  const auto expected = run_scenario(*m.tf, contiguous);

  // Room for the ~190 positions live at once, with some slack to be reused.
  const int n_blocks = (240 + bs - 1) / bs;
  PagedKVCache paged(m.tf->cache_shape(), 4, n_blocks, bs, type);
  const auto got = run_scenario(*m.tf, paged);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
      << "block size " << bs << ", " << dtype_name(type);
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, PagedMatchesContiguous,
                         ::testing::Values(std::make_tuple(1, DType::F16),
                                           std::make_tuple(16, DType::F16),
                                           std::make_tuple(7, DType::F16),
                                           std::make_tuple(7, DType::F32)));

// ---------------------------------------------------------------- prefix caching

namespace {

// Logits of every position of `tokens` from one prefill into a fresh contiguous cache.
std::vector<float> fresh_prefill(Transformer& tf, const std::vector<int>& tokens) {
  ContiguousKVCache cache(tf.cache_shape(), 1, 256);
  ForwardBatch b;
  b.add_sequence(cache.allocate(), tokens.data(), static_cast<int>(tokens.size()), 0, true, false);
  std::vector<float> all;
  run(tf, cache, b, all);
  return all;
}

// Prefill tokens[start..] into `slot` (all logits).
std::vector<float> prefill_rest(Transformer& tf, KVCache& cache, int slot,
                                const std::vector<int>& tokens, int start) {
  ForwardBatch b;
  b.add_sequence(slot, &tokens[start], static_cast<int>(tokens.size()) - start, start, true, false);
  std::vector<float> all;
  run(tf, cache, b, all);
  return all;
}

// Rows [from, to) of logits for positions counted from 0.
std::vector<float> rows(const std::vector<float>& logits, int V, int from, int to) {
  return {logits.begin() + size_t(from) * V, logits.begin() + size_t(to) * V};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST(PagedPrefixCache, SharedPrefixIsReusedAndLogitsStayExact) {
  SyntheticModel m("paged_prefix");
  Transformer& tf = *m.tf;
  const int V = m.vocab(), bs = 8;
  const auto shared = test::pseudo_random_ids(40, V, 10);
  const auto p1 = concat(shared, test::pseudo_random_ids(5, V, 11)),
             p2 = concat(shared, test::pseudo_random_ids(7, V, 12)),
             p3 = concat(shared, test::pseudo_random_ids(3, V, 13));
  PagedKVCache cache(tf.cache_shape(), 4, 24, bs, DType::F16);

  // First request: nothing cached; prefill it all, then publish its prompt.
  int s1 = cache.allocate();
  EXPECT_EQ(cache.attach_prefix(s1, p1), 0);
  auto l1 = prefill_rest(tf, cache, s1, p1, 0);
  EXPECT_TRUE(same_bits(l1, fresh_prefill(tf, p1)));
  cache.publish_prefix(s1, p1);
  EXPECT_EQ(cache.shared_length(s1), 40);  // 5 full blocks; block 5 (positions 40..44) private

  // Second request: attaches the 5 shared blocks and computes only its own tail.
  // cached_prefix tells as much beforehand, taking no reference.
  EXPECT_EQ(cache.cached_prefix(p2), 40);
  EXPECT_EQ(cache.cached_prefix(std::span<const int>(p2).first(40)), 32) << "not the last block";
  EXPECT_EQ(cache.cached_prefix(test::pseudo_random_ids(47, V, 15)), 0);
  for (int blk : first_blocks(cache.block_table(s1), 5)) EXPECT_EQ(cache.block_refs(blk), 1);
  int s2 = cache.allocate();
  ASSERT_EQ(cache.attach_prefix(s2, p2), 40);
  EXPECT_EQ(cache.stats().prefix_queried_tokens, 45 + 47) << "both attach_prefix calls' tokens";
  EXPECT_EQ(cache.stats().prefix_hit_tokens, 40);
  EXPECT_EQ(cache.length(s2), 40);
  EXPECT_EQ(first_blocks(cache.block_table(s2), 5), first_blocks(cache.block_table(s1), 5));
  for (int blk : first_blocks(cache.block_table(s2), 5)) EXPECT_EQ(cache.block_refs(blk), 2);
  const auto used_before = cache.stats().blocks_used;
  auto l2 = prefill_rest(tf, cache, s2, p2, 40);
  EXPECT_EQ(cache.stats().blocks_used, used_before + 1);  // only the tail needed a block
  const auto ref2 = fresh_prefill(tf, p2);
  EXPECT_TRUE(same_bits(l2, rows(ref2, V, 40, 47)));
  cache.publish_prefix(s2, p2);

  // The first request ends while the second still reads the shared blocks; a
  // third request then takes every free block and fills it with other K/V.
  const auto table2 = cache.block_table(s2);
  cache.free(s1);
  for (int blk : first_blocks(table2, 5)) EXPECT_EQ(cache.block_refs(blk), 1);
  int s3 = cache.allocate();
  const auto other = test::pseudo_random_ids(static_cast<int>(cache.free_positions()), V, 14);
  EXPECT_EQ(cache.attach_prefix(s3, other), 0);
  prefill_rest(tf, cache, s3, other, 0);
  EXPECT_EQ(cache.free_positions(), 0);
  cache.free(s3);

  // The second request decodes on: its logits match an uncached run of the same tokens.
  const auto cont = test::pseudo_random_ids(6, V, 15);
  std::vector<float> got;
  for (int i = 0; i < 6; ++i) {
    ForwardBatch b;
    b.add_sequence(s2, &cont[i], 1, cache.length(s2), false, true);
    run(tf, cache, b, got);
  }
  const auto ref_cont = fresh_prefill(tf, concat(p2, cont));
  EXPECT_TRUE(same_bits(got, rows(ref_cont, V, 47, 53)));

  // Once the second request ends too, the shared blocks stay cached (count as free)...
  cache.free(s2);
  auto st = cache.stats();
  EXPECT_EQ(st.blocks_cached, 5);
  EXPECT_EQ(st.blocks_used, 0);
  EXPECT_EQ(cache.free_positions(), cache.total_positions());

  // ...and a third request reuses those very blocks.
  int s4 = cache.allocate();
  ASSERT_EQ(cache.attach_prefix(s4, p3), 40);
  EXPECT_EQ(first_blocks(cache.block_table(s4), 5), first_blocks(table2, 5));
  EXPECT_EQ(cache.stats().blocks_cached, 0);
  auto l4 = prefill_rest(tf, cache, s4, p3, 40);
  EXPECT_TRUE(same_bits(l4, rows(fresh_prefill(tf, p3), V, 40, 43)));
}

TEST(PagedPrefixCache, AttachNeverMapsTheLastTokensBlock) {
  PagedKVCache c(kSmallShape, 4, 16, 4, DType::F32);
  const std::vector<int> p = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  int s = fake_prefill(c, p);
  c.publish_prefix(s, p);
  EXPECT_EQ(c.shared_length(s), 12);
  auto attach = [&](std::vector<int> tokens) {
    int t = c.allocate();
    int n = c.attach_prefix(t, tokens);
    c.free(t);
    return n;
  };
  EXPECT_EQ(attach(p), 8);  // the last token is at position 11, in block 2
  EXPECT_EQ(attach(concat(p, {13})), 12);
  EXPECT_EQ(attach(concat(p, {13, 14, 15, 16, 17})), 12);
  EXPECT_EQ(attach({1, 2, 3, 4, 5, 6, 7, 8, 9}), 8);
  EXPECT_EQ(attach({1, 2, 3, 4, 5, 6, 7, 8}), 4);
  EXPECT_EQ(attach({1, 2, 3, 4, 5}), 4);
  EXPECT_EQ(attach({1, 2, 3, 4}), 0);
  EXPECT_EQ(attach({1}), 0);
  EXPECT_EQ(attach({}), 0);
  EXPECT_EQ(attach({1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11, 12, 13}), 4);  // differs in block 1
  EXPECT_EQ(attach({0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}), 0);
}

TEST(PagedPrefixCache, PublishRegistersOnlyFullBlocks) {
  PagedKVCache c(kSmallShape, 4, 16, 4, DType::F32);
  const std::vector<int> p = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 2 full blocks + 2 tokens
  int s = fake_prefill(c, p);
  c.publish_prefix(s, p);
  EXPECT_EQ(c.shared_length(s), 8);
  c.free(s);
  EXPECT_EQ(c.stats().blocks_cached, 2);  // the partly filled block went back to the free list
  EXPECT_EQ(c.free_positions(), 64);

  // A longer prompt with the same first 12 tokens still finds only the 8 published.
  int t = c.allocate();
  EXPECT_EQ(c.attach_prefix(t, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}), 8);
  // Publishing a prefix that ends inside a block publishes nothing of that block.
  c.free(t);
  const std::vector<int> q = {7, 7, 7, 7, 7, 7, 7};
  int u = fake_prefill(c, q);
  c.publish_prefix(u, {7, 7, 7});
  EXPECT_EQ(c.shared_length(u), 0);
  c.publish_prefix(u, q);
  EXPECT_EQ(c.shared_length(u), 4);
  c.publish_prefix(u, q);  // publishing again changes nothing
  EXPECT_EQ(c.shared_length(u), 4);
  EXPECT_THROW(c.publish_prefix(u, {7, 7, 7, 8, 7}), Error);  // not what the slot holds
}

TEST(PagedPrefixCache, EvictsLeastRecentlyUsedWhenFreeListRunsOut) {
  PagedKVCache c(kSmallShape, 8, 6, 4, DType::F32);
  const std::vector<int> x = {1, 1, 1, 1, 0}, y = {2, 2, 2, 2, 0}, z = {3, 3, 3, 3, 0};
  std::vector<int> full_blocks;
  for (const auto* p : {&x, &y, &z}) {
    int s = fake_prefill(c, *p);
    c.publish_prefix(s, *p);
    full_blocks.push_back(c.block_table(s)[0]);
    c.free(s);  // the full block stays cached, the partial one is freed
  }
  const int block_x = full_blocks[0], block_y = full_blocks[1], block_z = full_blocks[2];
  EXPECT_EQ(c.cached_blocks_lru(), (std::vector<int>{block_x, block_y, block_z}));
  EXPECT_EQ(c.free_positions(), 24);

  // Using x again makes it the most recently used.
  int t = c.allocate();
  EXPECT_EQ(c.attach_prefix(t, x), 4);
  EXPECT_EQ(c.cached_blocks_lru(), (std::vector<int>{block_y, block_z}));
  c.free(t);
  EXPECT_EQ(c.cached_blocks_lru(), (std::vector<int>{block_y, block_z, block_x}));

  // Three free blocks: the fourth comes from evicting y, then z, then x.
  int big = c.allocate();
  ASSERT_TRUE(c.reserve(big, 16));
  EXPECT_EQ(c.cached_blocks_lru(), (std::vector<int>{block_z, block_x}));
  EXPECT_EQ(c.free_positions(), 8);
  EXPECT_EQ(c.stats().blocks_cached, 2);
  ASSERT_TRUE(c.reserve(big, 20));
  EXPECT_EQ(c.cached_blocks_lru(), (std::vector<int>{block_x}));

  auto attach = [&](const std::vector<int>& tokens) {
    int s = c.allocate();
    int n = c.attach_prefix(s, tokens);
    c.free(s);
    return n;
  };
  EXPECT_EQ(attach(y), 0);
  EXPECT_EQ(attach(z), 0);
  EXPECT_EQ(attach(x), 4);
  EXPECT_FALSE(c.reserve(big, 28));  // 1 cached block left, 2 needed: nothing evicted
  EXPECT_EQ(attach(x), 4);
}

TEST(PagedPrefixCache, EvictsDeeperBlocksOfAChainFirst) {
  PagedKVCache c(kSmallShape, 4, 4, 2, DType::F32);
  const std::vector<int> p = {1, 2, 3, 4, 5, 6, 9};
  int s = fake_prefill(c, p);
  c.publish_prefix(s, p);
  const auto table = c.block_table(s);
  c.free(s);
  EXPECT_EQ(c.cached_blocks_lru(), (std::vector<int>{table[2], table[1], table[0]}));
  int big = c.allocate();
  ASSERT_TRUE(c.reserve(big, 4));  // the free block and the deepest cached one
  c.free(big);
  int t = c.allocate();
  EXPECT_EQ(c.attach_prefix(t, p), 4);  // the first two blocks still chain
}

TEST(PagedPrefixCache, HashCollisionsNeverReturnWrongBlocks) {
  PagedKVCache c(kSmallShape, 8, 32, 4, DType::F32);
  c.set_hash_bits_for_testing(0);  // every block of every prefix has the same hash
  const std::vector<int> p = {1, 2, 3, 4, 5, 6, 7, 8, 0}, q = {1, 2, 3, 4, 50, 60, 70, 80, 0},
                         r = {10, 11, 12, 13, 5, 6, 7, 8, 0};
  std::vector<std::vector<int>> tables;
  for (const auto* prompt : {&p, &q, &r}) {
    int s = fake_prefill(c, *prompt);
    c.publish_prefix(s, *prompt);
    tables.push_back(c.block_table(s));
  }
  // q's first block is p's (same tokens): the second publish shared it.
  EXPECT_EQ(tables[1][0], tables[0][0]);

  auto attach = [&](const std::vector<int>& tokens) {
    int s = c.allocate();
    c.attach_prefix(s, tokens);
    auto table = c.block_table(s);
    c.free(s);
    return table;
  };
  EXPECT_EQ(attach({10, 11, 12, 13, 5, 6, 7, 8, 1}), first_blocks(tables[2], 2));
  EXPECT_EQ(attach({1, 2, 3, 4, 50, 60, 70, 80, 1}), first_blocks(tables[1], 2));
  // Block 1's tokens exist in the index (as q's), but under another parent.
  EXPECT_EQ(attach({10, 11, 12, 13, 50, 60, 70, 80, 1}), first_blocks(tables[2], 1));
  EXPECT_EQ(attach({5, 6, 7, 8, 1, 2, 3, 4, 1}), std::vector<int>{});
  EXPECT_EQ(attach({99, 98, 97, 96, 5}), std::vector<int>{});
}

TEST(PagedPrefixCache, PublishOfADuplicatePrefixSharesTheFirstCopy) {
  // Two requests with the same prompt prefilled before either published.
  PagedKVCache c(kSmallShape, 4, 8, 4, DType::F32);
  const std::vector<int> p = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  int a = fake_prefill(c, p), b = fake_prefill(c, p);
  EXPECT_EQ(c.free_positions(), 8);  // 6 blocks in use
  c.publish_prefix(a, p);
  c.publish_prefix(b, p);
  EXPECT_EQ(first_blocks(c.block_table(b), 2), first_blocks(c.block_table(a), 2));
  EXPECT_NE(c.block_table(b)[2], c.block_table(a)[2]);
  EXPECT_EQ(c.block_refs(c.block_table(a)[0]), 2);
  EXPECT_EQ(c.free_positions(), 16);  // b's two copies went back to the free list
  EXPECT_EQ(c.shared_length(b), 8);
}

TEST(PagedPrefixCache, SharedBlocksAreReadOnly) {
  PagedKVCache c(kSmallShape, 4, 16, 4, DType::F32);
  std::vector<float> row(kSmallShape.row_elems(), 0.5f);
  const std::vector<int> p = {1, 2, 3, 4, 5, 6, 7, 8};
  int a = fake_prefill(c, p);
  c.publish_prefix(a, p);  // every position of a is now in a shared block
  EXPECT_THROW(c.store(a, 0, 7, row.data(), row.data()), Error);
  EXPECT_THROW(c.truncate_to(a, 7), Error);
  EXPECT_THROW(c.set_length(a, 4), Error);
  ASSERT_TRUE(c.reserve(a, 9));
  c.store(a, 0, 8, row.data(), row.data());  // the next block is private
  c.set_length(a, 9);
  c.truncate_to(a, 8);  // rolling back to the end of the prompt is fine

  int b = c.allocate();
  ASSERT_EQ(c.attach_prefix(b, concat(p, {9})), 8);
  EXPECT_THROW(c.store(b, 1, 3, row.data(), row.data()), Error);
  EXPECT_THROW(c.truncate_to(b, 4), Error);
  EXPECT_THROW(c.publish_prefix(b, {1, 2, 3, 4, 5, 6, 7, 0}), Error);  // not the attached tokens
  ASSERT_TRUE(c.reserve(b, 9));
  c.store(b, 1, 8, row.data(), row.data());
  c.set_length(b, 9);
  c.truncate_to(b, 8);
  EXPECT_EQ(c.length(b), 8);
}

TEST(PrefixIndex, ChildOfAnEvictedParentNeverMatches) {
  // Parent block 0 is erased and its id reused for another root prefix: block 1,
  // still indexed as the old parent's child, must not extend the new one even
  // when hashes collide.
  PrefixIndex idx(4, 2);
  idx.set_hash_bits_for_testing(0);
  const int t0[] = {1, 2}, t1[] = {3, 4}, other[] = {8, 9};
  idx.insert(0, idx.chain_hash(PrefixIndex::kRootHash, t0), -1, t0);
  idx.insert(1, idx.chain_hash(idx.hash_of(0), t1), 0, t1);
  EXPECT_EQ(idx.find(0, 0, t1), 1);
  idx.erase(0);
  idx.insert(0, idx.chain_hash(PrefixIndex::kRootHash, other), -1, other);
  EXPECT_EQ(idx.find(0, -1, other), 0);
  EXPECT_EQ(idx.find(0, 0, t1), -1);
  EXPECT_EQ(idx.find(0, -1, t0), -1);
}

TEST(PrefixIndex, ChainHashCoversTheWholePrefix) {
  PrefixIndex idx(1, 3);
  const int a[] = {1, 2, 3}, b[] = {1, 2, 4}, c[] = {3, 2, 1};
  const uint64_t root = PrefixIndex::kRootHash;
  EXPECT_NE(idx.chain_hash(root, a), idx.chain_hash(root, b));
  EXPECT_NE(idx.chain_hash(root, a), idx.chain_hash(root, c));
  EXPECT_NE(idx.chain_hash(idx.chain_hash(root, a), c), idx.chain_hash(idx.chain_hash(root, b), c));
  EXPECT_EQ(idx.chain_hash(idx.chain_hash(root, a), c), idx.chain_hash(idx.chain_hash(root, a), c));
}
