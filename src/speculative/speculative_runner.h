// The speculative round. For a batch of requests, each round:
//  1. draft: the policy (draft_policy.h) gives each request a draft length K
//     (0: a plain decode step); the drafter proposes up to K tokens for all of
//     them together (batched draft steps);
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
#include "model/transformer.h"
#include "speculative/draft_policy.h"
#include "speculative/drafter.h"
#include "speculative/generation.h"
#include "speculative/verifier.h"

namespace tandem {

class SpeculativeRunner {
 public:
  // drafter may be null: plain decoding.
  SpeculativeRunner(Transformer& target, KVCache& cache, Drafter* drafter, SpecOptions opt);

  // One forward feeding chunks[i].second more tokens of chunks[i].first (tokens
  // its target cache lacks, up to its prefill_end()). A new request whose prompt
  // is then complete gets its first token sampled.
  void prefill(const std::vector<std::pair<Generation*, int>>& chunks);
  // Draft lengths for this round (0: a plain decode step), from the policy.
  std::vector<int> plan(const std::vector<Generation*>& seqs);
  // One decode round for every request (each fully prefilled), drafting up to
  // k[i] tokens for seqs[i] (the engine may lower plan()'s lengths when KV blocks
  // run short).
  void step(const std::vector<Generation*>& seqs, const std::vector<int>& k);
  // The cache positions beyond its tokens that seq's round may write when its
  // draft's main chain has k tokens (a tree's other nodes included).
  int positions_for(const Generation& seq, int k) const;
  // The request gave up its target slot (preempted, or finished): free what the
  // drafter holds for it.
  void release(Generation& seq);
  // The request finished: release it and let the policy forget it.
  void finish(Generation& seq);

  const DraftPolicy& policy() const { return policy_; }
  Drafter* drafter() const { return drafter_; }

 private:
  // What the policy is told of each request this round.
  std::vector<RoundRequest> describe(const std::vector<Generation*>& seqs) const;
  // Steps 1-2: drafts_ for every request; returns the steady draft step's
  // milliseconds (negative: none measured).
  double draft(std::span<const RoundRequest> round, const std::vector<int>& k);
  // Step 4 for the target cache: keep `base` positions and the accepted drafts.
  void roll_back(const Generation& seq, const Draft& draft, const Verdict& v, int base);
  // Step 3: one target forward over pending tokens and drafts; returns its
  // milliseconds. first_row_[i]: the logits row of request i's first position.
  double verify(const std::vector<Generation*>& seqs);
  // Steps 3-4 for one request (its logits rows are modified: repetition penalty).
  Verdict accept(Generation& seq, const Draft& draft, float* logits);
  // What verifying for seq applies (its constraint) and reports (log-probabilities
  // into logprobs_).
  VerifyExtras extras(const Generation& seq);

  Transformer& target_;
  KVCache& cache_;
  Drafter* drafter_;
  DraftPolicy policy_;
  AlignedVector<float> logits_;  // cache-line aligned rows for the LM head's stores
  std::vector<Draft> drafts_;
  std::vector<TokenLogprobs> logprobs_;  // of the request being accepted
  VerifyScratch verify_scratch_;
  std::vector<int> first_row_;
  ForwardBatch batch_;
};

}  // namespace tandem
