// The CUDA forward pass end to end (cuda_model/cuda_transformer.h), on a GPU:
//  - its logits against the CPU pass's on synthetic models, for every weight
//    type tandem loads;
//  - a row's logits bit-identical whether it runs alone (M = 1) or among K + 1
//    rows, through the whole forward (every kernel, the paged cache, the LM head);
//  - CUDA graph replay bit-identical to the eager launches, for decode, verify
//    and tree-verify steps;
//  - greedy speculative decoding equal to plain greedy decoding on the GPU, with
//    n-gram drafting (chains and trees) and a draft model.
// Skipped with "no CUDA device" where there is none. NOT YET RUN ON A GPU: the
// tolerances below are the design's estimates, to be checked on the first run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cuda_model/cuda_transformer.h"
#include "cuda_model/device_choice.h"
#include "cuda_test_util.h"
#include "engine/prompt_logits.h"
#include "model/model.h"
#include "support/paths.h"
#include "support/spec_harness.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;
using namespace tandem::cuda_model;

namespace {

std::unique_ptr<Model> synthetic(DType t, Arch arch, const std::string& name) {
  test::SyntheticSpec spec;
  spec.arch = arch;
  spec.weight_type = t;
  if (dtype_info(t).block_size == 256) {  // K-quants need 256-wide rows
    spec.d_model = 256;
    spec.d_ff = 512;
  }
  return Model::load(test::write_synthetic_gguf(spec, test::temp_dir(name) + "/m.gguf"));
}

ForwardPassSpec one_sequence(int n_ctx, int max_tokens = 64) {
  ForwardPassSpec s;
  s.max_tokens = max_tokens;
  s.kv.kind = KVCacheConfig::Kind::Paged;
  s.kv.n_slots = 2;
  s.kv.n_ctx = n_ctx;
  s.kv.block_size = 16;
  return s;
}

std::unique_ptr<CudaTransformer> cuda_pass(const Model& m, const ForwardPassSpec& s, bool graphs) {
  CudaOptions o;
  o.graphs = graphs;
  return std::make_unique<CudaTransformer>(m, s, o);
}

// Every position's logits of ids, prefilled in one pass.
std::vector<float> prefill_all(ForwardPass& tf, KVCache& cache, const std::vector<int>& ids) {
  const int slot = cache.allocate();
  ForwardBatch b;
  b.add_sequence(slot, ids.data(), static_cast<int>(ids.size()), 0, true, false);
  std::vector<float> out(ids.size() * size_t(tf.vocab_size()));
  tf.forward(b, cache, out.data());
  cache.free(slot);
  return out;
}

class CudaForwardTypes : public test::CudaDeviceTestWithParam<DType> {};

}  // namespace

// Tolerance: the CPU quantizes activations to 8 bits for quantized weights
// (kernels/cpu) where the GPU multiplies in fp32, so for those types the
// difference is that quantization's noise: relative RMS difference of a row's
// logits below 3%, and the same argmax in at least 90% of the rows. For F32,
// F16 and BF16 weights both sides sum fp32 products in different orders: every
// logit within 1e-3 of (max |logit| of its row + 1).
TEST_P(CudaForwardTypes, LogitsMatchTheCpu) {
  const DType t = GetParam();
  auto m = synthetic(t, t == DType::F32 ? Arch::Qwen2 : Arch::Llama, "cuda_fwd");
  const int V = m->config().vocab_size, n = 24;
  const auto ids = test::pseudo_random_ids(n, V, 11);
  ThreadPool pool(1);
  const std::vector<float> cpu = prompt_logits(*m, pool, ids, DType::F16);
  auto tf = cuda_pass(*m, one_sequence(64), false);
  auto cache = tf->make_cache(one_sequence(64).kv);
  const std::vector<float> gpu = prefill_all(*tf, *cache, ids);
  const bool exactish = t == DType::F32 || t == DType::F16 || t == DType::BF16;
  int same_argmax = 0;
  for (int r = 0; r < n; ++r) {
    const float* a = &cpu[size_t(r) * V];
    const float* b = &gpu[size_t(r) * V];
    double diff2 = 0, norm2 = 0, scale = 0;
    for (int i = 0; i < V; ++i) {
      diff2 += double(a[i] - b[i]) * (a[i] - b[i]);
      norm2 += double(a[i]) * a[i];
      scale = std::max(scale, double(std::fabs(a[i])));
    }
    same_argmax += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
    if (exactish) {
      for (int i = 0; i < V; ++i)
        ASSERT_NEAR(a[i], b[i], 1e-3 * (scale + 1)) << "row " << r << " logit " << i;
    } else {
      EXPECT_LT(std::sqrt(diff2 / std::max(norm2, 1e-30)), 0.03) << "row " << r;
    }
  }
  EXPECT_GE(same_argmax, exactish ? n : n * 9 / 10);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaForwardTypes,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                           DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

class CudaForward : public test::CudaDeviceTest {};

// Prefill of the first p positions, then each later position alone (M = 1)
// against the same positions verified together (M = K + 1): the same bits, for
// eager passes and for graph replays.
TEST_F(CudaForward, RowsAreBitIdenticalWhateverM) {
  auto m = synthetic(DType::Q4_K, Arch::Qwen2, "cuda_m1");
  const int V = m->config().vocab_size, p = 20, K = 5;
  const auto ids = test::pseudo_random_ids(p + K + 1, V, 3);
  for (bool graphs : {false, true}) {
    auto tf = cuda_pass(*m, one_sequence(64), graphs);
    auto cache = tf->make_cache(one_sequence(64).kv);
    const int slot = cache->allocate();
    ForwardBatch b;
    b.add_sequence(slot, ids.data(), p, 0, false, true);
    std::vector<float> one(V), all(size_t(K + 1) * V);
    tf->forward(b, *cache, one.data());
    b.clear();
    b.add_sequence(slot, &ids[p], K + 1, p, true, false);
    tf->forward(b, *cache, all.data());
    cache->truncate_to(slot, p);
    for (int i = 0; i <= K; ++i) {
      b.clear();
      b.add_sequence(slot, &ids[p + i], 1, p + i, true, false);
      tf->forward(b, *cache, one.data());
      ASSERT_EQ(0, std::memcmp(one.data(), &all[size_t(i) * V], V * sizeof(float)))
          << "position " << p + i << (graphs ? " (graphs)" : " (eager)");
    }
  }
}

// The same steps through two passes, one replaying graphs and one eager:
// decode steps of two sequences, a verify of K + 1 positions, and a drafted
// tree; every logit bit-identical.
TEST_F(CudaForward, GraphReplayEqualsEager) {
  auto m = synthetic(DType::Q8_0, Arch::Llama, "cuda_graph");
  const int V = m->config().vocab_size;
  const auto ids = test::pseudo_random_ids(40, V, 5);
  std::vector<std::vector<float>> results[2];
  for (int g = 0; g < 2; ++g) {
    auto tf = cuda_pass(*m, one_sequence(128), g == 1);
    auto cache = tf->make_cache(one_sequence(128).kv);
    const int s0 = cache->allocate(), s1 = cache->allocate();
    ForwardBatch b;
    auto run = [&] {
      std::vector<float> out(b.logit_rows.size() * size_t(V));
      tf->forward(b, *cache, out.data());
      results[g].push_back(std::move(out));
    };
    b.add_sequence(s0, ids.data(), 10, 0, false, true);  // prefill (eager in both)
    b.add_sequence(s1, &ids[10], 7, 0, false, true);
    run();
    for (int step = 0; step < 3; ++step) {  // decode: 2 sequences x 1 position
      b.clear();
      b.add_sequence(s0, &ids[20 + step], 1, 10 + step, false, true);
      b.add_sequence(s1, &ids[30 + step], 1, 7 + step, false, true);
      run();
    }
    b.clear();  // verify: 5 positions of s0
    b.add_sequence(s0, &ids[24], 5, 13, true, false);
    run();
    cache->truncate_to(s0, 14);
    b.clear();  // a tree on s1: root, two children, a grandchild
    const int tree[] = {1, 2, 3, 4}, parent[] = {-1, 0, 0, 2};
    b.add_tree(s1, tree, parent, 4, 10, true);
    run();
    if (g == 1) {
      EXPECT_GT(tf->graphs_captured(), 0);
    }
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i)
    EXPECT_EQ(0, std::memcmp(results[0][i].data(), results[1][i].data(),
                             results[0][i].size() * sizeof(float)))
        << "step " << i;
}

// Greedy output with speculation equals greedy output without it, token for
// token, on the GPU: n-gram chains and trees, and a draft model (itself on the GPU).
TEST_F(CudaForward, GreedySpeculativeEqualsPlain) {
  const test::Models m = test::load_models(Arch::Llama, 384, false);
  const ForwardPassFactory cuda = forward_pass_factory(Device::Cuda);
  std::vector<Request> reqs;
  for (const auto& p : test::spec_prompts(384)) reqs.push_back(test::greedy_request(p, 24));
  SpecOptions plain;
  plain.k = 1;
  const auto want = test::run(m, test::DraftKind::None, plain, reqs, 2, 1, cuda);
  struct Case {
    test::DraftKind kind;
    int tree;
    const char* name;
  };
  for (const Case& c :
       {Case{test::DraftKind::Ngram, 0, "ngram"}, Case{test::DraftKind::Ngram, 2, "ngram tree"},
        Case{test::DraftKind::SameQuantized, 0, "draft model"},
        Case{test::DraftKind::SameQuantized, 2, "draft model tree"}}) {
    SpecOptions so;
    so.k = 4;
    so.tree_extra = c.tree;
    so.rate_guard = false;
    const auto got = test::run(m, c.kind, so, reqs, 2, 1, cuda);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i].tokens, want[i].tokens) << c.name << ", prompt " << i;
  }
}
