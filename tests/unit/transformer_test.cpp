// The forward pass: batch invariance (a position's logits do not depend on how
// many positions share the pass), GGUF and Hugging Face loads of the same
// weights giving identical logits, and KV rollback.
#include <gtest/gtest.h>

#include <cstring>

#include "cache/contiguous_kv_cache.h"
#include "core/error.h"
#include "engine/prompt_logits.h"
#include "model/model.h"
#include "model/transformer.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;

namespace {

// Logits of every position computed three ways: one prefill pass, one position
// at a time, and chunks of 1, 6 and 3 positions (like verification rounds).
void expect_batch_invariant(const Model& m, int n) {
  ThreadPool pool(2);
  Transformer tf(m, pool);
  const int V = tf.vocab_size();
  auto ids = test::pseudo_random_ids(n, V, 7);
  ContiguousKVCache cache(tf.cache_shape(), 1, n + 4);

  int slot = cache.allocate();
  ForwardBatch b;
  b.add_sequence(slot, ids.data(), n, 0, true, false);
  std::vector<float> full(size_t(n) * V);
  tf.forward(b, cache, full.data());
  ASSERT_EQ(cache.length(slot), n);
  cache.free(slot);

  slot = cache.allocate();
  std::vector<float> one(V);
  for (int i = 0; i < n; ++i) {
    b.clear();
    b.add_sequence(slot, &ids[i], 1, i, true, false);
    tf.forward(b, cache, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), &full[size_t(i) * V], V * sizeof(float)))
        << "position " << i << " differs between prefill and single-token decode";
  }
  cache.free(slot);

  slot = cache.allocate();
  int pos = 0;
  for (int chunk : {1, 6, 3, 16}) {
    if (pos >= n) break;
    chunk = std::min(chunk, n - pos);
    b.clear();
    b.add_sequence(slot, &ids[pos], chunk, pos, true, false);
    std::vector<float> out(size_t(chunk) * V);
    tf.forward(b, cache, out.data());
    ASSERT_EQ(0, std::memcmp(out.data(), &full[size_t(pos) * V], out.size() * sizeof(float)))
        << "chunk of " << chunk << " at position " << pos << " differs from prefill";
    pos += chunk;
  }
  cache.free(slot);
}

}  // namespace

class SyntheticInvariance : public ::testing::TestWithParam<std::tuple<Arch, DType>> {};

TEST_P(SyntheticInvariance, LogitsIndependentOfBatchShape) {
  test::SyntheticSpec spec;
  spec.arch = std::get<0>(GetParam());
  spec.weight_type = std::get<1>(GetParam());
  if (dtype_info(spec.weight_type).block_size == 256) {  // K-quants need 256-wide rows
    spec.d_model = 256;
    spec.d_ff = 512;
  }
  auto path = test::write_synthetic_gguf(spec, test::temp_dir("inv") + "/m.gguf");
  auto m = Model::load(path);
  expect_batch_invariant(*m, 26);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SyntheticInvariance,
                         ::testing::Combine(::testing::Values(Arch::Llama, Arch::Qwen2),
                                            ::testing::Values(DType::F32, DType::F16, DType::BF16,
                                                              DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                                              DType::Q5_0, DType::Q4_K, DType::Q5_K,
                                                              DType::Q6_K)),
                         [](const ::testing::TestParamInfo<std::tuple<Arch, DType>>& info) {
                           return std::string(std::get<0>(info.param) == Arch::Llama ? "llama_"
                                                                                     : "qwen2_") +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

TEST(Transformer, SmolLM2BatchInvariant) {
  auto m = Model::load(test::cached_model("smollm2-135m-instruct-q4_1.gguf"));
  expect_batch_invariant(*m, 20);
}

TEST(Transformer, GGUFAndHFGiveIdenticalLogits) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2})
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      test::SyntheticSpec spec;
      spec.arch = arch;
      spec.weight_type = t;
      spec.tied_embeddings = arch == Arch::Llama;
      spec.llama3_rope_scaling = arch == Arch::Llama;
      auto dir = test::temp_dir("hf");
      auto gguf = Model::load(test::write_synthetic_gguf(spec, dir + "/m.gguf"));
      auto hf = Model::load(test::write_synthetic_hf_dir(spec, dir + "/hf"));
      ThreadPool pool(1);
      auto ids = test::pseudo_random_ids(24, spec.vocab_size, 3);
      auto a = prompt_logits(*gguf, pool, ids), b = prompt_logits(*hf, pool, ids);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
          << "arch " << int(arch) << " type " << dtype_name(t);
    }
}

TEST(Transformer, TruncateThenRecomputeMatches) {
  test::SyntheticSpec spec;
  auto m = Model::load(test::write_synthetic_gguf(spec, test::temp_dir("tr") + "/m.gguf"));
  ThreadPool pool(1);
  Transformer tf(*m, pool);
  const int V = tf.vocab_size();
  ContiguousKVCache cache(tf.cache_shape(), 1, 64);
  int slot = cache.allocate();
  auto ids = test::pseudo_random_ids(12, V, 1);
  ForwardBatch b;
  b.add_sequence(slot, ids.data(), 8, 0, false, true);
  std::vector<float> ref(V), alt(V);
  tf.forward(b, cache, ref.data());
  // Append 4 wrong tokens (a rejected draft), roll back, then feed the real token.
  b.clear();
  b.add_sequence(slot, &ids[8], 4, 8, false, true);
  tf.forward(b, cache, alt.data());
  cache.truncate_to(slot, 8);
  b.clear();
  b.add_sequence(slot, &ids[8], 1, 8, false, true);
  tf.forward(b, cache, alt.data());
  ContiguousKVCache fresh(tf.cache_shape(), 1, 64);
  int s2 = fresh.allocate();
  b.clear();
  b.add_sequence(s2, ids.data(), 9, 0, false, true);
  tf.forward(b, fresh, ref.data());
  EXPECT_EQ(0, std::memcmp(ref.data(), alt.data(), V * sizeof(float)));
}

TEST(Transformer, RejectsBadBatches) {
  test::SyntheticSpec spec;
  auto m = Model::load(test::write_synthetic_gguf(spec, test::temp_dir("bad") + "/m.gguf"));
  ThreadPool pool(1);
  Transformer tf(*m, pool);
  ContiguousKVCache cache(tf.cache_shape(), 1, 16);
  int slot = cache.allocate();
  std::vector<float> out(tf.vocab_size());
  ForwardBatch b;
  int bad_token = spec.vocab_size + 5;
  b.add_sequence(slot, &bad_token, 1, 0, false, true);
  EXPECT_THROW(tf.forward(b, cache, out.data()), Error);
  int ok = 1;
  b.clear();
  b.add_sequence(slot, &ok, 1, 3, false, true);  // skips positions 0..2
  EXPECT_THROW(tf.forward(b, cache, out.data()), Error);
  std::vector<int> many(17, 1);
  b.clear();
  b.add_sequence(slot, many.data(), 17, 0, false, true);  // beyond the cache
  EXPECT_THROW(tf.forward(b, cache, out.data()), Error);
  EXPECT_EQ(cache.length(slot), 0);
}

// A batch longer than the transformer's passes runs in several: every wanted
// row's logits are the bits of one long pass, in the batch's output order (here
// reversed, with a row wanted twice), for two slots whose runs straddle the
// passes' boundaries, with the whole vocabulary or output ranges.
TEST(Transformer, BatchesLongerThanAPassGiveTheSameLogits) {
  test::SyntheticSpec spec;
  spec.arch = Arch::Qwen2;
  spec.weight_type = DType::Q8_0;
  auto m = Model::load(test::write_synthetic_gguf(spec, test::temp_dir("split") + "/m.gguf"));
  ThreadPool pool(2);
  Transformer whole(*m, pool), passes_of_4(*m, pool, 4);
  ASSERT_EQ(passes_of_4.max_tokens(), 4);
  const int V = whole.vocab_size();
  auto ids = test::pseudo_random_ids(16, V, 11);
  ForwardBatch all;
  all.add_sequence(0, ids.data(), 7, 0, true, false);      // rows 0..6
  all.add_sequence(1, ids.data() + 7, 9, 0, true, false);  // rows 7..15
  ForwardBatch picked = all;
  picked.logit_rows = {15, 8, 8, 6, 3, 0};
  for (bool restricted : {false, true}) {
    if (restricted) {
      for (Transformer* tf : {&whole, &passes_of_4}) tf->restrict_output({{0, 100}, {250, V}});
    }
    ContiguousKVCache a(whole.cache_shape(), 2, 32), b(whole.cache_shape(), 2, 32);
    for (int s = 0; s < 2; ++s) {
      ASSERT_EQ(a.allocate(), s);
      ASSERT_EQ(b.allocate(), s);
    }
    std::vector<float> want(size_t(all.size()) * V), got(picked.logit_rows.size() * size_t(V));
    whole.forward(all, a, want.data());
    passes_of_4.forward(picked, b, got.data());
    for (int s = 0; s < 2; ++s) EXPECT_EQ(a.length(s), b.length(s));
    for (size_t j = 0; j < picked.logit_rows.size(); ++j)
      ASSERT_EQ(
          0, std::memcmp(&got[j * V], &want[size_t(picked.logit_rows[j]) * V], V * sizeof(float)))
          << "output row " << j << " (batch row " << picked.logit_rows[j] << ")"
          << (restricted ? " with output ranges" : "");
  }
}
