// The CUDA forward pass end to end (cuda_model/cuda_transformer.h), on a GPU:
//  - its logits against the CPU pass's on synthetic models, for every weight
//    type tandem loads;
//  - a row's logits bit-identical whether it runs alone (M = 1) or among K + 1
//    rows, through the whole forward (every kernel, the paged cache, the LM head);
//  - CUDA graph replay bit-identical to the eager launches, for decode, verify
//    and tree-verify steps;
//  - greedy speculative decoding equal to plain greedy decoding on the GPU, with
//    n-gram drafting (chains and trees) and a draft model.
//  - the fused launches bit-identical to the unfused ones;
//  - a contiguous cache configuration holding every slot's context.
// Skipped with "no CUDA device" where there is none. First run on an H100 on
// 2026-11-27 and again on an H200 on 2026-11-28 (docs/cuda.md), where all of it
// passed. The logits, M = 1 against M = K + 1, graphs against eager, fused
// against unfused and greedy speculative against plain run under both GEMV
// mappings (cuda_kernels.h: GemvMapping; the tests with "lanes" in their names
// or traces).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "cuda_model/cuda_transformer.h"
#include "cuda_model/device_choice.h"
#include "cuda_test_util.h"
#include "engine/prompt_logits.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/model.h"
#include "quant/quants.h"
#include "support/paths.h"
#include "support/spec_harness.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;
using namespace tandem::cuda_model;
using cuda::GemvMapping;

namespace {

std::string synthetic_file(DType t, Arch arch, const std::string& name) {
  test::SyntheticSpec spec;
  spec.arch = arch;
  spec.weight_type = t;
  if (dtype_info(t).block_size == 256) {  // K-quants need 256-wide rows
    spec.d_model = 256;
    spec.d_ff = 512;
  }
  return test::write_synthetic_gguf(spec, test::temp_dir(name) + "/m.gguf");
}

std::unique_ptr<Model> synthetic(DType t, Arch arch, const std::string& name) {
  return Model::load(synthetic_file(t, arch, name));
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

std::unique_ptr<CudaTransformer> cuda_pass(const Model& m, const ForwardPassSpec& s, bool graphs,
                                           GemvMapping gemv = GemvMapping::Groups) {
  CudaOptions o;
  o.graphs = graphs;
  o.gemv = gemv;
  return std::make_unique<CudaTransformer>(m, s, o);
}

const GemvMapping kMappings[] = {GemvMapping::Groups, GemvMapping::Lanes};
const char* mapping_name(GemvMapping g) { return g == GemvMapping::Lanes ? "lanes" : "groups"; }

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

struct TypeCase {
  DType type;
  GemvMapping gemv;
};
class CudaForwardTypes : public test::CudaDeviceTestWithParam<TypeCase> {};

}  // namespace

// The same model with every tensor dequantized to F32: the values the GPU
// multiplies by (group_decode.h gives the reference dequantization's bits).
std::string dequantized_twin(const std::string& path) {
  GGUFFile f(path);
  GGUFWriter w;
  for (const auto& [key, value] : f.metadata()) w.set(key, value);
  for (const TensorView& t : f.tensors()) {
    std::vector<float> values(t.numel());
    dequantize_row(t.type, t.data, values.data(), t.numel());
    w.add_tensor_f32(t.name, DType::F32, t.shape, values);
  }
  const std::string out = path + ".f32.gguf";
  w.write(out);
  return out;
}

// Tolerance. Against the CPU pass over the dequantized twin: the GPU computes in
// fp32 with the same weights, only summing in another order, so every logit is
// within 1e-3 of (max |logit| of its row + 1), the bound the F32 model meets
// (its measured differences are near 1e-6 of that). Against the CPU pass over
// the quantized file, which quantizes activations to 8 bits (kernels/cpu): the
// same argmax in at least 90% of the rows (measured on the H100, 2026-11-27:
// the rows' relative RMS difference is 3-4%, that 8-bit noise).
TEST_P(CudaForwardTypes, LogitsMatchTheCpu) {
  const DType t = GetParam().type;
  const std::string path =
      synthetic_file(t, t == DType::F32 ? Arch::Qwen2 : Arch::Llama, "cuda_fwd");
  auto m = Model::load(path);
  auto twin = Model::load(dequantized_twin(path));
  const int V = m->config().vocab_size, n = 24;
  const auto ids = test::pseudo_random_ids(n, V, 11);
  ThreadPool pool(1);
  const std::vector<float> cpu = prompt_logits(*m, pool, ids, DType::F16);
  const std::vector<float> exact = prompt_logits(*twin, pool, ids, DType::F16);
  auto tf = cuda_pass(*m, one_sequence(64), false, GetParam().gemv);
  auto cache = tf->make_cache(one_sequence(64).kv);
  const std::vector<float> gpu = prefill_all(*tf, *cache, ids);
  int same_argmax = 0;
  for (int r = 0; r < n; ++r) {
    const float* a = &cpu[size_t(r) * V];
    const float* e = &exact[size_t(r) * V];
    const float* b = &gpu[size_t(r) * V];
    double scale = 0;
    for (int i = 0; i < V; ++i) scale = std::max(scale, double(std::fabs(e[i])));
    for (int i = 0; i < V; ++i)
      ASSERT_NEAR(e[i], b[i], 1e-3 * (scale + 1)) << "row " << r << " logit " << i;
    same_argmax += std::max_element(a, a + V) - a == std::max_element(b, b + V) - b;
  }
  const bool exactish = t == DType::F32 || t == DType::F16 || t == DType::BF16;
  EXPECT_GE(same_argmax, exactish ? n : n * 9 / 10);
}

// Every type under each mapping: "Q4_K" (groups, as run on the H100), "Q4_K_lanes".
std::vector<TypeCase> type_cases() {
  std::vector<TypeCase> cases;
  for (GemvMapping g : kMappings)
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                    DType::Q5_0, DType::Q4_K, DType::Q5_K, DType::Q6_K})
      cases.push_back({t, g});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CudaForwardTypes, ::testing::ValuesIn(type_cases()),
                         [](const ::testing::TestParamInfo<TypeCase>& info) {
                           return std::string(dtype_name(info.param.type)) +
                                  (info.param.gemv == GemvMapping::Lanes ? "_lanes" : "");
                         });

class CudaForward : public test::CudaDeviceTest {};

// Prefill of the first p positions, then each later position alone (M = 1)
// against the same positions verified together (M = K + 1): the same bits, for
// eager passes and for graph replays, under each GEMV mapping.
TEST_F(CudaForward, RowsAreBitIdenticalWhateverM) {
  auto m = synthetic(DType::Q4_K, Arch::Qwen2, "cuda_m1");
  const int V = m->config().vocab_size, p = 20, K = 5;
  const auto ids = test::pseudo_random_ids(p + K + 1, V, 3);
  for (GemvMapping gemv : kMappings)
    for (bool graphs : {false, true}) {
      SCOPED_TRACE(mapping_name(gemv));
      auto tf = cuda_pass(*m, one_sequence(64), graphs, gemv);
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

// Decode steps of two sequences, a verify of K + 1 positions and a drafted
// tree, through one pass with these options: every step's logits.
std::vector<std::vector<float>> scripted_steps(const Model& m, const CudaOptions& o,
                                               DType kv_type = DType::F16,
                                               int* graphs_captured = nullptr) {
  const int V = m.config().vocab_size;
  const auto ids = test::pseudo_random_ids(40, V, 5);
  std::vector<std::vector<float>> results;
  ForwardPassSpec spec = one_sequence(128);
  spec.kv.type = kv_type;
  CudaTransformer tf(m, spec, o);
  auto cache = tf.make_cache(spec.kv);
  const int s0 = cache->allocate(), s1 = cache->allocate();
  ForwardBatch b;
  auto run = [&] {
    std::vector<float> out(b.logit_rows.size() * size_t(V));
    tf.forward(b, *cache, out.data());
    results.push_back(std::move(out));
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
  if (graphs_captured) *graphs_captured = tf.graphs_captured();
  return results;
}

void expect_same_steps(const std::vector<std::vector<float>>& a,
                       const std::vector<std::vector<float>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)))
        << "step " << i;
}

// The same steps through two passes, one replaying graphs and one eager: every
// logit bit-identical, under each GEMV mapping.
TEST_F(CudaForward, GraphReplayEqualsEager) {
  auto m = synthetic(DType::Q8_0, Arch::Llama, "cuda_graph");
  for (GemvMapping gemv : kMappings) {
    SCOPED_TRACE(mapping_name(gemv));
    CudaOptions eager, graphs;
    eager.graphs = false;
    eager.gemv = graphs.gemv = gemv;
    int captured = 0;
    const auto a = scripted_steps(*m, eager);
    const auto b = scripted_steps(*m, graphs, DType::F16, &captured);
    EXPECT_GT(captured, 0);
    expect_same_steps(a, b);
  }
}

// The fused launches (Q/K/V with bias, RoPE and the KV store; gate, up and
// SwiGLU; two columns a warp) against each operation launched on its own:
// every logit bit-identical, for Qwen2 (biases, NeoX RoPE) and Llama (normal
// RoPE), with an F16 and an F32 KV cache, under each GEMV mapping (both passes
// under the same one).
TEST_F(CudaForward, FusedLaunchesEqualUnfused) {
  struct Case {
    DType weights;
    Arch arch;
    DType kv;
  };
  for (const Case& c :
       {Case{DType::Q4_K, Arch::Qwen2, DType::F16}, Case{DType::Q8_0, Arch::Llama, DType::F16},
        Case{DType::BF16, Arch::Qwen2, DType::F32}}) {
    SCOPED_TRACE(std::string(dtype_name(c.weights)) + " weights, KV " +
                 std::string(dtype_name(c.kv)));
    auto m = synthetic(c.weights, c.arch, "cuda_fused");
    for (GemvMapping gemv : kMappings) {
      SCOPED_TRACE(mapping_name(gemv));
      CudaOptions fused, unfused;
      fused.graphs = unfused.graphs = false;
      unfused.fused = false;
      fused.gemv = unfused.gemv = gemv;
      expect_same_steps(scripted_steps(*m, unfused, c.kv), scripted_steps(*m, fused, c.kv));
    }
  }
}

// A profiling pass (CudaOptions::profile, bench decode --profile) times every
// kind of kernel, each per-layer kind once a layer and step, and computes the
// same logits as a pass that does not.
TEST_F(CudaForward, ProfileTimesEveryKindOfKernel) {
  auto m = synthetic(DType::Q4_K, Arch::Qwen2, "cuda_profile");
  CudaOptions plain, profiled;
  plain.graphs = false;
  profiled.profile = true;
  const auto a = scripted_steps(*m, plain);
  CudaTransformer tf(*m, one_sequence(64), profiled);
  auto cache = tf.make_cache(one_sequence(64).kv);
  const int slot = cache->allocate();
  const auto ids = test::pseudo_random_ids(4, m->config().vocab_size, 2);
  ForwardBatch b;
  b.add_sequence(slot, ids.data(), 3, 0, false, true);
  std::vector<float> out(size_t(m->config().vocab_size));
  tf.forward(b, *cache, out.data());
  tf.clear_profile();
  b.clear();
  b.add_sequence(slot, &ids[3], 1, 3, false, true);
  tf.forward(b, *cache, out.data());
  std::map<std::string, PassProfileEntry> kinds;
  for (const auto& e : tf.profile()) kinds[e.name] = e;
  const int64_t layers = m->config().n_layers;
  for (const char* name :
       {"qkv_rope_store", "attention", "gemm wo", "gate_up_swiglu", "gemm down"}) {
    ASSERT_EQ(kinds.count(name), 1u) << name;
    EXPECT_EQ(kinds[name].count, layers) << name;
    EXPECT_GT(kinds[name].ms, 0.0) << name;
  }
  for (const char* name : {"embedding", "lm head", "logits to the host", "inputs to the device"})
    EXPECT_EQ(kinds.count(name), 1u) << name;
  EXPECT_EQ(kinds["rmsnorm"].count, 2 * layers + 1);  // two a layer, the output norm
  expect_same_steps(a, scripted_steps(*m, profiled));
  EXPECT_EQ(tf.graphs_captured(), 0);  // profiling runs every pass eagerly
}

// A contiguous configuration promises every slot its n_ctx positions at once:
// on the device (blocks of 16) each slot's are rounded up to whole blocks, so
// three slots of 20 positions all fit (blocks for 60 positions would not).
TEST_F(CudaForward, ContiguousCacheHoldsEverySlotsContext) {
  auto m = synthetic(DType::Q8_0, Arch::Llama, "cuda_contiguous");
  ForwardPassSpec spec;
  spec.max_tokens = 32;
  spec.kv.kind = KVCacheConfig::Kind::Contiguous;
  spec.kv.n_slots = 3;
  spec.kv.n_ctx = 20;
  auto tf = cuda_pass(*m, spec, false);
  auto cache = tf->make_cache(spec.kv);
  for (int i = 0; i < 3; ++i) {
    const int slot = cache->allocate();
    EXPECT_TRUE(cache->reserve(slot, 20)) << "slot " << slot;
  }
}

// Plain greedy decoding, then speculative with each drafter, through `cuda`:
// the same tokens.
void greedy_speculative_equals_plain(const ForwardPassFactory& cuda) {
  const test::Models m = test::load_models(Arch::Llama, 384, false);
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

// Greedy output with speculation equals greedy output without it, token for
// token, on the GPU: n-gram chains and trees, and a draft model (itself on the
// GPU), under each GEMV mapping.
TEST_F(CudaForward, GreedySpeculativeEqualsPlain) {
  for (GemvMapping gemv : kMappings) {
    SCOPED_TRACE(mapping_name(gemv));
    CudaOptions o;
    o.gemv = gemv;
    greedy_speculative_equals_plain(forward_pass_factory(Device::Cuda, o));
  }
}
