// The engine: a request queue, a scheduler (admit, decode, retire; first come,
// first served), prefill in chunks interleaved with decode rounds, speculative
// or plain decoding for all running requests together, and retirement.
// Requests join and leave between steps (continuous batching). When KV blocks
// run short it first drafts less, then preempts the most recently admitted
// request (its blocks are freed and it is recomputed later: nothing is dropped).
//
// Not thread-safe: one thread calls submit/step/cancel (see AsyncEngine for a
// thread-safe front).
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "cache/kv_cache.h"
#include "cache/kv_cache_factory.h"
#include "engine/metrics.h"
#include "engine/request.h"
#include "engine/request_check.h"
#include "engine/sequence.h"
#include "model/forward_pass.h"
#include "speculative/drafter.h"
#include "speculative/speculative_runner.h"

namespace tandem {

struct EngineOptions {
  int max_batch = 1;        // requests decoded together
  int n_ctx = 4096;         // positions a request may use: prompt + generated tokens
  int prefill_chunk = 512;  // prompt tokens per prefill forward
  // The target's KV cache; the draft model's cache gets the same configuration.
  // Contiguous: max_batch slots of n_ctx positions. Paged: kv.n_positions
  // positions shared by all, with prefix caching of prompts.
  KVCacheConfig kv;
  bool prefix_cache = true;  // paged caches: share prompt blocks between requests
  SpecOptions spec;
  // The target's forward pass, and so the device it runs on (--device); empty:
  // the CPU transformer. Everything else of the engine is the same on every device.
  ForwardPassFactory forward_pass;
};

// The KV cache configuration the engine builds from its options (slots =
// max_batch, n_ctx); a draft model's cache should use the same.
KVCacheConfig engine_cache_config(const EngineOptions& opt);

class Engine {
 public:
  // drafter may be null (no speculation). The models must outlive the engine.
  Engine(const Model& target, ThreadPool& pool, EngineOptions opt,
         std::unique_ptr<Drafter> drafter = nullptr);
  ~Engine();

  // What a request must keep within to run here (vocabulary, context, KV cache):
  // the edge checks requests against these (engine/request_check.h).
  RequestLimits limits() const;
  // Queue a request; returns its id. The request is trusted: checked against
  // limits() where it entered.
  int submit(Request request);
  // Cancel a queued or running request; it finishes with reason "cancelled" at
  // the next step. Unknown or finished ids are ignored.
  void cancel(int id);
  // One step: admit what fits, one decode round for the running requests, one
  // prefill chunk, retire the finished. Returns false when nothing is left.
  bool step();
  // Step until every submitted request has finished.
  void run();
  // Finish every queued and running request with `reason` (after an error the
  // engine cannot recover from, so that no client waits forever).
  void abort_all(FinishReason reason);
  // The result of a finished request (once; nullopt while it runs). Results are
  // kept only for requests submitted without an on_finish callback.
  std::optional<RequestResult> take_result(int id);

  bool idle() const { return queue_.empty() && running_.empty(); }
  EngineMetrics metrics() const;
  const Model& target() const { return target_; }
  const EngineOptions& options() const { return opt_; }
  SpeculativeRunner& runner() { return *runner_; }
  Drafter* drafter() const { return drafter_.get(); }
  int n_ctx() const { return opt_.n_ctx; }

 private:
  void admit();
  void retire();
  void finish(Sequence& s);
  // Free a running request's KV storage and put it back at the front of the queue.
  void preempt(Sequence& s);
  Sequence* newest_running();
  // This round's plan (the policy's, within the KV room stated to it), after
  // preempting requests while even a plain step does not fit. Returns the
  // requests that decode.
  class RoundBudget;
  std::vector<Sequence*> plan_round(RoundPlan& plan);
  void observe_progress(Sequence& s, int generated_before);

  const Model& target_;
  EngineOptions opt_;
  std::unique_ptr<ForwardPass> tf_;
  std::unique_ptr<KVCache> cache_;
  std::unique_ptr<Drafter> drafter_;
  std::unique_ptr<SpeculativeRunner> runner_;
  int next_id_ = 0;
  uint64_t admissions_ = 0;
  std::deque<std::unique_ptr<Sequence>> queue_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::map<int, RequestResult> done_;
  RoundPlan plan_;  // this step's round (kept: its buffers are reused)
  EngineMetrics metrics_;
};

}  // namespace tandem
