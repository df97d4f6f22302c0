// Drafting with a smaller model of the same family. It keeps its own KV cache,
// one slot per sequence, holding a prefix of the sequence's tokens; on its first
// round for a sequence it prefills that prefix (lazily: the target's prefill
// never waits for the draft), and after every round it truncates its cache to
// the tokens the target kept. All sequences draft together: each draft step is
// one batched forward of the draft model. Where its cache shares prefixes
// (KVCacheConfig::share_prefixes, as the engine's does) a new sequence attaches
// the blocks earlier ones published and catches up on the rest only.
#pragma once
#include <map>
#include <memory>

#include "cache/kv_cache.h"
#include "cache/kv_cache_factory.h"
#include "model/forward_pass.h"
#include "model/model.h"
#include "sampling/gumbel_sampler.h"
#include "speculative/adaptive_k.h"
#include "speculative/draft_hints.h"
#include "speculative/drafter.h"

namespace tandem {

class ModelDrafter final : public Drafter, public DraftCostHints, public DraftMemory {
 public:
  // Throws tandem::Error when the draft cannot stand in for the target: a
  // different vocabulary size or different special-token ids.
  // The draft's cache gets `cache` (its n_ctx is capped at the draft's context).
  // vocab_limit > 0: the draft proposes only token ids below it, plus the
  // special and end-of-generation tokens (see Transformer::restrict_output).
  // Byte-level BPE vocabularies list tokens roughly by merge order, i.e. by
  // frequency, so the first ids cover almost everything a model writes.
  // siblings > 0: drafts are trees, the main chain plus at most that many
  // siblings (see add_sibling). forward_pass: the draft's device, as the
  // target's (EngineOptions::forward_pass; empty: the CPU).
  ModelDrafter(const Model& draft, const Model& target, ThreadPool& pool, KVCacheConfig cache,
               int vocab_limit = 0, int siblings = 0, const ForwardPassFactory& forward_pass = {});
  ~ModelDrafter() override;

  std::string name() const override;
  double propose(std::span<const DraftContext> reqs, std::span<const int> k,
                 std::vector<Draft>& out, const DraftStop* stop = nullptr) override;
  void sync(const DraftContext& req, const Draft& draft, int accepted) override;
  void release(int request_id) override;
  const DraftCostHints* cost_hints() const override { return this; }
  DraftMemory* memory() override { return this; }

  // DraftCostHints: catch-up at the measured rate; the relative cost is the
  // bytes of weights a draft step streams over the target's (output restricted
  // to its vocabulary share).
  int catch_up_tokens(const DraftContext& req) const override;
  double catch_up_ms(const DraftContext& req) const override;
  double relative_cost() const override { return relative_cost_; }

  // DraftMemory.
  int64_t positions_needed(const DraftContext& req, int k) override;
  int64_t free_positions() const override { return cache_->free_positions(); }
  const KVCache& cache() const override { return *cache_; }

  // Append the siblings ((chain index, token), in depth order) as tree nodes.
  static void add_siblings(const std::vector<std::pair<int, int>>& siblings, Draft& d);

  const Model& model() const { return draft_; }
  int n_ctx() const { return n_ctx_; }

 private:
  struct SeqState {
    int slot = -1;
    std::vector<int> cached;  // the tokens whose K/V the slot holds, in order
    int shared = 0;           // leading positions in shared prefix blocks (never truncated)
  };
  // The request's state; a new one gets a slot (null when none is free) with
  // the blocks of its longest cached prefix attached.
  SeqState* state_for(const DraftContext& req);
  // Offer the full blocks of a state's settled tokens (all but the last, which
  // has no K/V before the round) to the prefix cache, once they fill a new
  // block: a later request that starts the same way (a system prompt, the next
  // turn of a conversation) attaches them instead of catching up on them.
  void publish(SeqState& st, std::span<const int> tokens);

  // One request's drafting in a propose() call.
  struct Job {
    size_t i = 0;  // its index in the call's requests
    SeqState* st = nullptr;
    int k = 0;                 // tokens it may still draft (lowered by an early stop)
    int position = 0;          // the position of the token it drafts next
    int fed = -1;              // the token fed at this step (its previous draft)
    std::vector<int> context;  // tokens + drafts so far, for a repetition penalty (else empty)
    std::unique_ptr<TokenConstraint> constraint;  // the request's, advanced through the drafts
    std::vector<std::pair<int, int>> siblings;    // (depth - 1, token): after the chain
  };
  // Milliseconds of the steady draft steps of one call.
  struct StepTimes {
    double steady_ms = 0;
    int steady_steps = 0;
  };
  // The steps of propose(): who drafts and how many tokens at most (jobs_;
  // false: nobody); step 0's batch (what each draft cache lacks, ending in the
  // last token); a later step's (each job's previous draft; false: every draft
  // has stopped); the timed forward; one token per job from its logits row.
  bool select_jobs(std::span<const DraftContext> reqs, std::span<const int> k,
                   std::vector<Draft>& out);
  void feed_catch_up(std::span<const DraftContext> reqs);
  bool feed_last_drafts(const std::vector<Draft>& out, int step);
  void timed_forward(int step, StepTimes& times);
  void choose_tokens(std::span<const DraftContext> reqs, int step, std::vector<Draft>& out,
                     const DraftStop* stop);
  void decide_next_step(const std::vector<Draft>& out, int step, const DraftStop& stop);
  // Turn one row of draft logits into the next draft token for req (and its q,
  // and with `confident` its confidence), within the job's constraint. Returns
  // -1 when the constraint allows none of the ids the draft may propose.
  int choose(const DraftContext& req, float* logits, const Job& job, Draft& d, bool confident);
  // The draft's probability of `token` under plain softmax (greedy requests).
  float softmax_prob(const float* logits, int token) const;
  // A second candidate beside main-chain token d.tokens.back() at an uncertain
  // position (`position`, the chain token's): where the draft's likeliest token
  // has probability below kSiblingBelow (optimal mode: a property of the
  // distribution, decided before any draw, so sampled trees stay exact), the
  // runner-up (greedy; reproducible mode: of the same Gumbel race, where the chain
  // token's probability is below it) or a draw from q without the chain's token.
  // Returns -1 for none.
  int sibling(const DraftContext& req, float* logits, const Draft& d, int64_t position);
  static constexpr float kSiblingBelow = 0.8f;

  const Model& draft_;
  std::unique_ptr<ForwardPass> tf_;
  std::unique_ptr<KVCache> cache_;
  int n_ctx_;
  int siblings_;
  std::vector<std::pair<int, int>> output_ranges_;  // the ids it may propose (empty: all)
  std::map<int, SeqState> states_;                  // by request id
  int share_block_ = 0;             // the cache's block size where it shares prefixes, else 0
  std::vector<int> prefix_tokens_;  // attach/publish's argument (kept: no allocation per call)
  // Requests without a state: the positions their text would attach, and the
  // most its length allowed then, by id. The policy prices every request every
  // round, and a plain request's text (a long conversation's) would be hashed
  // again each time. The prefix index changes only inside propose()
  // (publication, eviction), which clears this; a lookup that stopped at its
  // length's limit is repeated once the text has grown past another block.
  struct Attachable {
    int positions = 0, limit = 0;
  };
  mutable std::map<int, Attachable> attachable_;
  AlignedVector<float> logits_;      // cache-line aligned rows for the LM head's stores
  GumbelSampler gumbel_;             // reproducible mode's choices
  std::vector<float> sibling_rest_;  // optimal mode: q without the chain's token
  std::vector<Job> jobs_;            // propose()'s first n_jobs_ (kept, with their buffers)
  size_t n_jobs_ = 0;
  std::span<Job> jobs() { return {jobs_.data(), n_jobs_}; }
  ForwardBatch batch_;  // one draft step's
  // Milliseconds per token fed by step 0s that caught up on many tokens.
  RunningCost catch_up_per_token_;
  double relative_cost_ = 0;
};

// Check that `draft` can draft for `target`: same vocabulary size and the same
// special-token ids. Throws tandem::Error naming both files and the difference.
void check_draft_compatible(const Model& draft, const Model& target);

}  // namespace tandem
