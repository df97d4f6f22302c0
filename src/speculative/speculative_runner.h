// The speculative round. For a batch of requests, each round carries out the
// plan the policy made (draft_policy.h, round_plan.h: a draft length K per
// request, 0 for a plain decode step, within the KV room the engine stated):
//  1. draft: the drafter proposes up to K tokens for all of them together
//     (batched draft steps), and the policy trims what is not worth verifying;
//  2. verify: one target forward over, per request, the tokens the target cache
//     lacks (the last sampled token) followed by its drafts, with logits at
//     every one of those K+1 positions (a draft tree is verified in the same
//     pass with tree attention: each node sees its own ancestors);
//  3. accept: per request, accept/reject (greedy or rejection sampling,
//     verifier.h), then the bonus or correction token; stop conditions apply to
//     accepted tokens only;
//  4. roll back: the target cache keeps the accepted tokens (a tree's accepted
//     path moved into place, then truncate_to), the drafter drops what the
//     target rejected;
// and the policy learns from the round's costs and verdicts.
// Because the kernels are batch-invariant, a position's logits are bit-identical
// to plain decoding's, so greedy output with speculation equals greedy output
// without it, token for token.
#pragma once
#include <span>
#include <utility>
#include <vector>

#include "cache/kv_cache.h"
#include "core/aligned.h"
#include "model/forward_pass.h"
#include "speculative/draft_policy.h"
#include "speculative/drafter.h"
#include "speculative/generation.h"
#include "speculative/verifier.h"

namespace tandem {

class SpeculativeRunner {
 public:
  // drafter may be null: plain decoding.
  // tuning: the draft policy's constants (tests that need decisions that do
  // not follow the wall clock change them).
  SpeculativeRunner(ForwardPass& target, KVCache& cache, Drafter* drafter, SpecOptions opt,
                    DraftPolicyTuning tuning = {});

  // One forward feeding chunks[i].second more tokens of chunks[i].first (tokens
  // its target cache lacks, up to its prefill_end()). A new request whose prompt
  // is then complete gets its first token sampled.
  void prefill(const std::vector<std::pair<Generation*, int>>& chunks);
  // This round's plan for `seqs` (each fully prefilled), from the policy,
  // within `budget` (the engine's KV room), into `out` (its buffers reused).
  void plan(const std::vector<Generation*>& seqs, const KvBudget& budget, RoundPlan& out);
  // One decode round for every request, as planned (seqs as given to plan()).
  void step(const std::vector<Generation*>& seqs, const RoundPlan& plan);
  // The request gave up its target slot (preempted, or finished): free what the
  // drafter holds for it.
  void release(Generation& seq);
  // The request finished: release it and let the policy forget it.
  void finish(Generation& seq);

  const DraftPolicy& policy() const { return policy_; }
  Drafter* drafter() const { return drafter_; }

 private:
  // What the policy is told of each request this round, into `round`.
  void describe(const std::vector<Generation*>& seqs, std::vector<RoundRequest>& round) const;
  // Step 1: drafts_ for every request; returns the steady draft step's
  // milliseconds (negative: none measured).
  double draft(const RoundPlan& plan);
  // Step 4 for the target cache: keep `base` positions and the accepted drafts.
  void roll_back(const Generation& seq, const Draft& draft, const Verdict& v, int base);
  // Step 3: one target forward over pending tokens and drafts; returns its
  // milliseconds. first_row_[i]: the logits row of request i's first position.
  double verify(const std::vector<Generation*>& seqs, const RoundPlan& plan);
  // Steps 3-4 for one request (its logits rows are modified: repetition penalty).
  const Verdict& accept(Generation& seq, const Draft& draft, float* logits);
  // What verifying for seq applies (its constraint) and reports (log-probabilities
  // into logprobs_).
  VerifyExtras extras(const Generation& seq);

  ForwardPass& target_;
  KVCache& cache_;
  Drafter* drafter_;
  DraftPolicy policy_;
  AlignedVector<float> logits_;  // cache-line aligned rows for the LM head's stores
  std::vector<Draft> drafts_;
  std::vector<DraftContext> contexts_;   // the drafter's view of the round's requests
  std::vector<TokenLogprobs> logprobs_;  // of the request being accepted
  VerifyScratch verify_scratch_;
  Verdict verdict_;  // the last verification's (accept() returns it)
  Draft no_draft_;   // what a new request's first token is verified against
  std::vector<int> first_row_;
  ForwardBatch batch_;
};

}  // namespace tandem
