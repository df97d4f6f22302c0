// The engine's scheduling on synthetic models: continuous batching, chunked
// prefill, a paged KV cache small enough to force preemption, prefix caching,
// cancellation. Every greedy output must equal the same request run alone.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine.h"
#include "model/model.h"
#include "speculative/model_drafter.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;

namespace {

struct Fixture {
  std::unique_ptr<Model> target, draft;
  Fixture() {
    auto dir = test::temp_dir("engine");
    test::SyntheticSpec s;
    s.context_length = 256;
    target = Model::load(test::write_synthetic_gguf(s, dir + "/t.gguf"));
    s.weight_type = DType::Q8_0;
    draft = Model::load(test::write_synthetic_gguf(s, dir + "/d.gguf"));
  }
};

std::vector<int> ids(int n, uint32_t seed) { return test::pseudo_random_ids(n, 384, seed); }

Request greedy(std::vector<int> prompt, int n) {
  Request r;
  r.prompt = std::move(prompt);
  r.params.max_tokens = n;
  r.params.ignore_eos = true;
  return r;
}

// Mixed prompt and output lengths; some share a long prefix.
std::vector<Request> workload() {
  std::vector<Request> reqs;
  auto shared = ids(40, 7);
  for (int i = 0; i < 10; ++i) {
    auto p = i % 3 == 0 ? shared : ids(5 + 9 * i, 100 + i);
    if (i % 3 == 0) {
      auto tail = ids(3 + i, 200 + i);
      p.insert(p.end(), tail.begin(), tail.end());
    }
    reqs.push_back(greedy(p, 10 + 7 * (i % 4)));
  }
  return reqs;
}

std::vector<RequestResult> run_all(Engine& e, const std::vector<Request>& reqs) {
  std::vector<int> id;
  for (const auto& r : reqs) id.push_back(e.submit(r));
  e.run();
  std::vector<RequestResult> out;
  for (int i : id) out.push_back(*e.take_result(i));
  return out;
}

std::vector<RequestResult> run_alone(const Model& m, const std::vector<Request>& reqs) {
  ThreadPool pool(1);
  EngineOptions eo;
  eo.n_ctx = 256;
  Engine e(m, pool, eo);
  return run_all(e, reqs);
}

EngineOptions paged(int max_batch, int positions, int block = 8) {
  EngineOptions eo;
  eo.max_batch = max_batch;
  eo.n_ctx = 256;
  eo.kv.kind = KVCacheConfig::Kind::Paged;
  eo.kv.n_positions = positions;
  eo.kv.block_size = block;
  return eo;
}

}  // namespace

TEST(Engine, ContinuousBatchingWithPreemptionMatchesRunningAlone) {
  Fixture f;
  auto reqs = workload();
  auto alone = run_alone(*f.target, reqs);
  ThreadPool pool(1);
  // 10 requests, up to 6 at once, in a cache of 160 positions: far too small for
  // all of them, so requests are preempted and recomputed.
  EngineOptions eo = paged(6, 160);
  eo.prefill_chunk = 24;
  Engine e(*f.target, pool, eo);
  auto got = run_all(e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].finish_reason, FinishReason::Length);
  }
  auto m = e.metrics();
  EXPECT_GT(m.preemptions, 0u) << "the cache was meant to force preemption";
  EXPECT_EQ(m.kv.blocks_used, 0) << "blocks leaked";
  EXPECT_EQ(m.requests["length"], reqs.size());
  EXPECT_GT(m.prefix_hit_tokens, 0) << "the shared prompt prefix was never reused";
}

TEST(Engine, SpeculativeBatchWithPreemptionMatchesRunningAlone) {
  Fixture f;
  auto reqs = workload();
  auto alone = run_alone(*f.target, reqs);
  ThreadPool pool(1);
  EngineOptions eo = paged(4, 200);
  eo.spec.k = 4;
  eo.spec.opt_out = false;  // draft every round, to exercise the draft cache under pressure
  auto drafter = std::make_unique<ModelDrafter>(*f.draft, *f.target, pool, engine_cache_config(eo));
  Engine e(*f.target, pool, eo, std::move(drafter));
  auto got = run_all(e, reqs);
  int drafted = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, alone[i].tokens) << "request " << i;
    drafted += got[i].stats.drafted;
  }
  EXPECT_GT(drafted, 0);
  auto m = e.metrics();
  EXPECT_EQ(m.kv.blocks_used, 0);
  EXPECT_EQ(m.draft_kv.blocks_used, 0) << "draft blocks leaked";
}

TEST(Engine, ChunkedPrefillMatchesOnePass) {
  Fixture f;
  std::vector<Request> reqs{greedy(ids(100, 1), 20), greedy(ids(61, 2), 20)};
  auto alone = run_alone(*f.target, reqs);
  ThreadPool pool(1);
  EngineOptions eo;
  eo.max_batch = 2;
  eo.n_ctx = 256;
  eo.prefill_chunk = 7;
  Engine e(*f.target, pool, eo);
  auto got = run_all(e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].tokens, alone[i].tokens);
}

TEST(Engine, PrefixCacheSkipsSharedPromptBlocks) {
  Fixture f;
  auto base = ids(64, 3);
  auto a = base, b = base;
  a.push_back(1);
  b.push_back(2);
  ThreadPool pool(1);
  Engine e(*f.target, pool, paged(2, 512, 16));
  auto first = run_all(e, {greedy(a, 8)});
  auto hits_before = e.metrics().prefix_hit_tokens;
  auto second = run_all(e, {greedy(b, 8)});
  // 64 shared tokens = 4 full blocks of 16.
  EXPECT_EQ(e.metrics().prefix_hit_tokens - hits_before, 64);
  EXPECT_EQ(e.metrics().prefix_queried_tokens, 65u + 65u);
  EXPECT_EQ(first[0].stats.n_cached_prompt, 0);
  EXPECT_EQ(second[0].stats.n_cached_prompt, 64);  // usage.prompt_tokens_details.cached_tokens
  EXPECT_EQ(second[0].tokens, run_alone(*f.target, {greedy(b, 8)})[0].tokens);
  EXPECT_LT(second[0].stats.prefill_ms, first[0].stats.prefill_ms * 10);  // sanity only
}

// A request that waits for room is looked up in the prefix cache at every step
// it tries; the metrics count its prompt once, when it is admitted.
TEST(Engine, PrefixLookupsCountedOncePerAdmission) {
  Fixture f;
  ThreadPool pool(1);
  // 96 positions: room for one 80-token request at a time. The first is
  // prefilled before the second arrives, which then waits (several steps) for
  // the first to finish.
  Engine e(*f.target, pool, paged(2, 96, 16));
  const int first = e.submit(greedy(ids(60, 4), 20));
  e.step();
  const int second = e.submit(greedy(ids(60, 5), 20));
  e.run();
  EXPECT_EQ(e.take_result(first)->tokens.size(), 20u);
  EXPECT_EQ(e.take_result(second)->tokens.size(), 20u);
  const auto& m = e.metrics();
  EXPECT_EQ(m.preemptions, 0u) << "meant to queue, not preempt";
  EXPECT_EQ(m.prefix_queried_tokens, 120u);
}

TEST(Engine, CancelQueuedAndRunningRequests) {
  Fixture f;
  ThreadPool pool(1);
  Engine e(*f.target, pool, paged(1, 512));
  int a = e.submit(greedy(ids(10, 1), 50));
  int b = e.submit(greedy(ids(10, 2), 50));
  int c = e.submit(greedy(ids(10, 3), 5));
  e.step();
  e.step();
  e.cancel(a);  // running
  e.cancel(b);  // queued
  e.run();
  auto ra = *e.take_result(a), rb = *e.take_result(b), rc = *e.take_result(c);
  EXPECT_EQ(ra.finish_reason, FinishReason::Cancelled);
  EXPECT_LT(ra.tokens.size(), 50u);
  EXPECT_EQ(rb.finish_reason, FinishReason::Cancelled);
  EXPECT_TRUE(rb.tokens.empty());
  EXPECT_EQ(rc.finish_reason, FinishReason::Length);
  EXPECT_EQ(e.metrics().kv.blocks_used, 0);
  EXPECT_EQ(e.metrics().requests["cancelled"], 2u);
}

TEST(Engine, OnFinishCallbackReceivesEveryResult) {
  Fixture f;
  ThreadPool pool(1);
  Engine e(*f.target, pool, paged(3, 512));
  std::vector<std::string> reasons;
  std::string streamed;
  for (int i = 0; i < 4; ++i) {
    Request r = greedy(ids(6, i), 6);
    r.on_finish = [&](const RequestResult& res) {
      reasons.push_back(finish_reason_name(res.finish_reason));
    };
    r.on_text = [&](const std::string& t) { streamed += t; };
    e.submit(r);
  }
  e.run();
  EXPECT_EQ(reasons.size(), 4u);
  EXPECT_FALSE(streamed.empty());
  EXPECT_FALSE(e.take_result(0).has_value()) << "results with a callback are not kept";
}

// Text a cancelled request was holding back (an incomplete UTF-8 character of
// the synthetic model's byte tokens) still reaches its stream: the streamed
// text always equals the result's text.
TEST(Engine, CancelledStreamsReceiveTheHeldBackTail) {
  Fixture f;
  int tails = 0;
  for (int steps = 1; steps <= 16; ++steps) {
    ThreadPool pool(1);
    Engine e(*f.target, pool, paged(1, 512));
    std::string streamed;
    RequestResult result;
    Request r = greedy(ids(8, 11), 40);
    r.on_text = [&](const std::string& t) { streamed += t; };
    r.on_finish = [&](const RequestResult& res) { result = res; };
    const int id = e.submit(r);
    for (int i = 0; i < steps; ++i) e.step();
    const size_t before_cancel = streamed.size();
    e.cancel(id);
    e.run();
    ASSERT_EQ(result.finish_reason, FinishReason::Cancelled) << steps;
    EXPECT_EQ(streamed, result.text) << "cancelled after " << steps << " steps";
    if (streamed.size() > before_cancel) ++tails;
  }
  EXPECT_GT(tails, 0) << "no cancellation point had text held back: the test proves nothing";
}
