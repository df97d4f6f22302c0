// Runs decode rounds for a batch of sequences, with or without speculation:
//  1. each sequence gets a draft length K (fixed, adaptive, or 0: plain decode;
//     reduced near the context limit and the token limit);
//  2. the drafter proposes up to K tokens per sequence (batched draft steps);
//  3. one target forward verifies all of them: per sequence, the tokens the
//     target cache lacks (the last sampled token g) followed by its drafts, with
//     logits at every one of those K+1 positions;
//  4. per sequence: accept/reject (greedy or rejection sampling), the bonus or
//     correction token, stop conditions on accepted tokens only;
//  5. rollback: the target cache keeps g and the accepted drafts (truncate_to),
//     the drafter drops what the target rejected.
// Because the kernels are batch-invariant, a position's logits are bit-identical
// to plain decoding's, so greedy output with speculation equals greedy output
// without it, token for token.
#pragma once
#include <memory>
#include <vector>

#include "cache/kv_cache.h"
#include "engine/sequence.h"
#include "model/transformer.h"
#include "spec/adaptive_k.h"
#include "spec/draft_stop.h"
#include "spec/drafter.h"

namespace tandem {

constexpr int kMaxDraft = 32;   // the longest draft a round may verify
// A request that stopped drafting tries one drafted token after kProbeEvery
// rounds; each probe after which drafting still does not pay doubles the wait,
// up to kProbeEvery << kMaxProbeBackoff rounds. Probes cost something (a draft
// model must first catch up on the tokens it missed), so text that stays
// unpredictable is probed ever more rarely, and a round carries one probe at
// most (the most overdue request's).
constexpr int kProbeEvery = 16;
constexpr int kMaxProbeBackoff = 4;
// Probes are sent only where drafting would pay at this acceptance: when it is
// the cost of drafting (a slow draft, a big batch) and not the acceptance that
// stops a request, a probe could not change the decision.
constexpr double kProbeAlpha = 0.9;
// A request's first rounds draft as if its acceptance were kProbeAlpha until
// this many drafts were judged: one unlucky first round (a rejection on the
// first token says little) must not stop drafting for the next kProbeEvery
// rounds. Measured: Qwen pair on a code prompt, one early rejection kept fixed
// K = 3 at plain decoding for 60 of 73 rounds.
constexpr double kMinJudged = 8;
// The round that first measures a draft step drafts this many tokens (or the
// cap, if lower) for one request: enough to time steady draft steps and a
// verify pass over a few positions; beyond them the cost model extrapolates.
constexpr int kExploreDraft = 4;

struct SpecOptions {
  int k = 5;              // draft length; with adaptive, the most it may choose
  bool adaptive = false;  // choose K per round and per request (spec/adaptive_k.h)
  // With a fixed K: stop drafting for requests whose measured acceptance makes
  // speculation slower than plain decoding, given the batch (they resume when
  // the estimate, which fades back towards its prior, says drafting pays again).
  bool opt_out = true;
};

class SpeculativeRunner {
 public:
  // drafter may be null: plain decoding.
  SpeculativeRunner(Transformer& target, KVCache& cache, Drafter* drafter, SpecOptions opt);

  // One forward feeding chunks[i].second more tokens of chunks[i].first (tokens
  // its target cache lacks, up to its prefill_end()). A new request whose prompt
  // is then complete gets its first token sampled.
  void prefill(const std::vector<std::pair<Sequence*, int>>& chunks);
  // Draft lengths for this round (0: a plain decode step): fixed K, or the
  // batch-wide choice of spec/adaptive_k.h, always within each sequence's cap.
  // Counts the probes of requests that stopped drafting.
  std::vector<int> plan(const std::vector<Sequence*>& seqs);
  // One decode round for every sequence (each fully prefilled), drafting up to
  // k[i] tokens for seqs[i] (the engine may lower plan()'s lengths when KV blocks
  // run short).
  void step(const std::vector<Sequence*>& seqs, const std::vector<int>& k);
  // Release what the drafter holds for a finished sequence.
  void release(const Sequence& seq);

  const CostModel& costs() const { return costs_; }
  Drafter* drafter() const { return drafter_; }
  const SpecOptions& options() const { return opt_; }

 private:
  // The most this sequence may draft this round (0 when it opted out or has no
  // room: a round emits up to K + 1 tokens and writes K + 1 cache positions).
  int draft_cap(const Sequence& seq) const;
  // The draft lengths the batch-wide choice may pick from.
  std::vector<int> k_choices() const;
  // Free proposals (n-gram): keep of each draft only the part worth verifying.
  void trim_free_drafts(const std::vector<Sequence*>& seqs);
  // After the planner chose k for `batch`: a request that stopped drafting gets
  // a one-token probe now and then (see kProbeEvery).
  void add_probes(const std::vector<Sequence*>& seqs, const std::vector<DraftCandidate>& batch,
                  std::vector<int>& k);
  // With -k auto and a drafter that drafts step by step: the rule that stops
  // each request's draft when one more token no longer pays (null: none yet).
  std::unique_ptr<CostAwareStop> draft_stop(const std::vector<Sequence*>& seqs,
                                            const std::vector<int>& k) const;
  bool stops_early() const { return opt_.adaptive && drafter_ && !drafter_->free_proposals(); }
  // The drafter's catch-up cost for seq: measured rate, or its prior.
  double catch_up_ms(const Sequence& seq) const;
  // Sample the sequence's next token from one row of logits (prefill's last row).
  int sample_next(Sequence& seq, float* logits);

  Transformer& target_;
  KVCache& cache_;
  Drafter* drafter_;
  SpecOptions opt_;
  CostModel costs_;
  ConfidenceCalibration calibration_;
  // Tokens emitted and milliseconds spent by recent rounds (fading sums): the
  // rate a drafted token's cost is weighed against.
  double recent_tokens_ = 0, recent_ms_ = 0;
  AlignedVector<float> logits_;  // cache-line aligned rows for the LM head's stores
  std::vector<Draft> drafts_;
  ForwardBatch batch_;
};

}  // namespace tandem
