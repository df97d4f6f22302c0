// A whole speculative round allocates nothing once its buffers have grown
// (to a request's longest draft so far):
// planning, drafting (n-gram lookups and a draft model), the verify pass, the
// sampler and verifier (greedy, reproducible and optimal sampling), accepting and
// rolling back. Counted, as in forward_state_test, by replacing the global
// allocation functions of this test program (every thread). With
// TANDEM_ALLOC_TRACE=1 the first allocations inside a counted window print
// their call stacks.
#include <execinfo.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <vector>

#include "cache/kv_cache_factory.h"
#include "model/model.h"
#include "model/transformer.h"
#include "speculative/drafter_factory.h"
#include "speculative/speculative_runner.h"
#include "support/paths.h"
#include "support/spec_harness.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

namespace {
std::atomic<long> g_allocations{0};
std::atomic<bool> g_counting{false};
thread_local bool t_in_trace = false;
int g_traced = 0;

void trace_allocation() {
  if (t_in_trace || !g_counting.load() || g_traced >= 5 || !std::getenv("TANDEM_ALLOC_TRACE"))
    return;
  t_in_trace = true;
  ++g_traced;
  void* frames[24];
  const int n = backtrace(frames, 24);
  std::fprintf(stderr, "--- allocation %d in a counted window:\n", g_traced);
  backtrace_symbols_fd(frames, n, 2);
  t_in_trace = false;
}

void* counted_alloc(size_t size, size_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  trace_allocation();
  if (size == 0) size = 1;
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(align, (size + align - 1) / align * align);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(size_t size) { return counted_alloc(size, alignof(std::max_align_t)); }
void* operator new(size_t size, std::align_val_t align) {
  return counted_alloc(size, static_cast<size_t>(align));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }

using namespace tandem;
using namespace tandem::test;

namespace {

// A request as the round sees it, without the engine's text stream: it keeps
// every token up to its limit.
class Plain final : public Generation {
 public:
  Plain(int id, std::vector<int> prompt, GenerationParams params)
      : Generation(id, std::move(prompt), std::move(params)) {}
  bool accept(const EmittedToken& t) override {
    append(t.id);
    return remaining() > 0;
  }
};

class Unbounded final : public KvBudget {
 public:
  bool fits(std::span<const int>, std::span<const int>) const override { return true; }
};

struct RoundSetup {
  const char* name;
  DraftKind drafter;
  float temperature;
  SamplingMode mode;
};

// Rounds of two requests decoding together; returns the allocations of
// `counted` rounds after the warm-up.
long allocations_in_rounds(const Models& m, const RoundSetup& s, SpecOptions so, int counted) {
  ThreadPool pool(2);
  Transformer tf(*m.target, pool, 64);
  KVCacheConfig kv;
  kv.n_slots = 2;
  kv.n_ctx = 4096;
  auto cache = make_kv_cache(tf.cache_shape(), kv);
  std::unique_ptr<Drafter> drafter;
  if (s.drafter == DraftKind::Ngram) drafter = make_ngram_drafter(so.tree_extra);
  if (s.drafter == DraftKind::SameQuantized)
    drafter = make_model_drafter(*m.same_q8, *m.target, pool, kv, 0, so.tree_extra, false);
  SpeculativeRunner runner(tf, *cache, drafter.get(), so);
  const auto prompts = spec_prompts(m.target->config().vocab_size);
  std::vector<std::unique_ptr<Plain>> gens;
  for (int i = 0; i < 2; ++i) {
    GenerationParams p;
    p.max_tokens = 3500;
    p.sampling.temperature = s.temperature;
    p.sampling.mode = s.mode;
    p.sampling.seed = 7 + i;
    gens.push_back(std::make_unique<Plain>(i, prompts[2 + i], p));
    gens.back()->target_slot = cache->allocate();
  }
  std::vector<Generation*> seqs{gens[0].get(), gens[1].get()};
  for (Generation* g : seqs) runner.prefill({{g, static_cast<int>(g->tokens().size())}});
  const Unbounded budget;
  RoundPlan plan;
  auto round = [&] {
    runner.plan(seqs, budget, plan);
    runner.step(seqs, plan);
  };
  // Buffers grow to what the rounds need, once: a request's first drafting
  // round makes the drafter's state for it, a draft longer than any before it
  // grows that request's lists. Such rounds are not counted; every other round
  // must allocate nothing. Warm-up first: until ten counted rounds in a row
  // allocated nothing (a round that allocates every time never settles: the
  // warm-up then ends after 300 rounds and the count below shows it).
  std::vector<int> longest(seqs.size(), -1);
  auto grows = [&](const std::vector<int>& drafted_before) {
    bool grew = false;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int drafted = seqs[i]->stats().drafted - drafted_before[i];
      if (drafted > longest[i]) {
        grew = grew || drafted > 0;
        longest[i] = drafted;
      }
    }
    return grew;
  };
  auto counted_round = [&](long* allocated) {
    std::vector<int> before(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) before[i] = seqs[i]->stats().drafted;
    const long start = g_allocations.load();
    g_counting = true;
    round();
    g_counting = false;
    *allocated = g_allocations.load() - start;
    return !grows(before);
  };
  int quiet = 0;
  for (int r = 0; r < 300 && quiet < 10; ++r) {
    long n = 0;
    if (counted_round(&n)) quiet = n == 0 ? quiet + 1 : 0;
  }
  long allocations = 0;
  for (int r = 0; r < counted; ++r) {
    long n = 0;
    if (counted_round(&n)) allocations += n;
  }
  return allocations;
}

}  // namespace

TEST(RoundAllocation, CountingSeesAllocations) {
  const long before = g_allocations.load();
  std::vector<int> v(100);
  EXPECT_GT(g_allocations.load() - before, 0);
}

TEST(RoundAllocation, ASpeculativeRoundAllocatesNothing) {
  // A target and its Q8_0 copy as the draft, with room for the longest warm-up.
  Models m;
  SyntheticSpec spec;
  spec.arch = Arch::Qwen2;
  spec.vocab_size = 384;
  spec.context_length = 4096;
  const std::string dir = temp_dir("round_alloc");
  m.target = Model::load(write_synthetic_gguf(spec, dir + "/target.gguf"));
  spec.weight_type = DType::Q8_0;
  m.same_q8 = Model::load(write_synthetic_gguf(spec, dir + "/q8.gguf"));
  const RoundSetup setups[] = {
      {"plain, greedy", DraftKind::None, 0.0f, SamplingMode::Reproducible},
      {"plain, reproducible", DraftKind::None, 0.8f, SamplingMode::Reproducible},
      {"plain, optimal", DraftKind::None, 0.8f, SamplingMode::Optimal},
      {"n-gram, greedy", DraftKind::Ngram, 0.0f, SamplingMode::Reproducible},
      {"n-gram, reproducible", DraftKind::Ngram, 0.8f, SamplingMode::Reproducible},
      {"n-gram, optimal", DraftKind::Ngram, 0.8f, SamplingMode::Optimal},
      {"draft model, greedy", DraftKind::SameQuantized, 0.0f, SamplingMode::Reproducible},
      {"draft model, reproducible", DraftKind::SameQuantized, 0.8f, SamplingMode::Reproducible},
      {"draft model, optimal", DraftKind::SameQuantized, 0.8f, SamplingMode::Optimal},
  };
  for (const RoundSetup& s : setups)
    for (SpecOptions so : {SpecOptions{4, false, false}, SpecOptions{8, true},
                           SpecOptions{4, false, false, 3}, SpecOptions{8, true, true, 4}}) {
      const long n = allocations_in_rounds(m, s, so, 20);
      EXPECT_EQ(n, 0) << s.name << (so.adaptive ? ", -k auto" : ", K=4")
                      << (so.tree_extra ? ", trees" : "") << ": " << n
                      << " allocations in 20 rounds (TANDEM_ALLOC_TRACE=1 shows where)";
    }
}
