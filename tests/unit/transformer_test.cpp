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

INSTANTIATE_TEST_SUITE_P(
    AllTypes, SyntheticInvariance,
    ::testing::Combine(::testing::Values(Arch::Llama, Arch::Qwen2),
                       ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                         DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q4_K,
                                         DType::Q5_K, DType::Q6_K)),
    [](const ::testing::TestParamInfo<std::tuple<Arch, DType>>& info) {
      return std::string(std::get<0>(info.param) == Arch::Llama ? "llama_" : "qwen2_") +
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
