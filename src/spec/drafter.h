// A drafter proposes tokens that the target model then verifies. Two exist: a
// smaller model of the same family (model_drafter.h) and prompt lookup over the
// text so far (ngram_drafter.h). A third (say, the target with layers skipped)
// implements this interface and nothing else changes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace tandem {

class DraftStop;
class KVCache;
class Sequence;

struct Draft {
  std::vector<int> tokens;
  // q[i]: the distribution tokens[i] was sampled from, after the request's own
  // sampling transforms. Empty when the drafter is deterministic or the request
  // is greedy: q is then a point mass on each token.
  std::vector<SamplingDistribution> q;
  // confidence[i]: the drafter's probability of tokens[i] (a draft model's, after
  // the request's transforms; see spec/draft_stop.h). Empty when it has none.
  std::vector<float> confidence;
  // The drafter's own estimate of the per-token acceptance of this proposal
  // (negative: none; the request's running estimate is used instead), and a tag
  // it can use to learn from the verdict (e.g. the n-gram length that matched).
  double alpha = -1;
  int tag = 0;

  void clear() {
    tokens.clear();
    q.clear();
    confidence.clear();
    alpha = -1;
    tag = 0;
  }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Propose up to k[i] tokens continuing seqs[i]->tokens() into out[i] (fewer, even
  // none, when the drafter has nothing good to offer or no room). Returns the
  // milliseconds of one steady-state draft step (one token per request, not a
  // lazy prefill), or a negative value when this call had none to measure.
  // A drafter that drafts step by step may stop a request early when `stop` (if
  // given) says the next token is not worth drafting.
  virtual double propose(const std::vector<Sequence*>& seqs, const std::vector<int>& k,
                         std::vector<Draft>& out, const DraftStop* stop = nullptr) = 0;
  // A round ended and the sequence's tokens changed: drop any state built on
  // drafts that were rejected. `draft` (as verified) had its first `accepted`
  // tokens accepted.
  virtual void sync(const Sequence& seq, const Draft& draft, int accepted) {}
  // Proposals cost (almost) nothing, so the runner asks for the longest it may
  // verify and then keeps only the part worth verifying. Otherwise it decides the
  // lengths first and asks for exactly those.
  virtual bool free_proposals() const { return false; }
  // Milliseconds that drafting for seq would first spend catching up: processing
  // the tokens the drafter lacks beyond the last one (a draft model's lazy
  // prefill of the prompt, or the text it missed while the request decoded
  // plainly), at the rate measured on earlier catch-ups. 0 when there is nothing
  // to catch up or no measurement yet.
  virtual double catch_up_ms(const Sequence& seq) const { return 0; }
  // The tokens that catch-up would process (0: none).
  virtual int catch_up_tokens(const Sequence& seq) const { return 0; }
  // Before its costs are measured, what a draft step and a catch-up token are
  // assumed to cost relative to the target's own (0: no estimate).
  virtual double relative_cost() const { return 0; }
  // The sequence is finished: free what the drafter holds for it.
  virtual void release(const Sequence& seq) {}
  // KV cache room: the free positions its cache would consume to propose k tokens
  // for seq (may allocate the sequence's slot), and the free positions it has.
  // Drafters without a cache need none.
  virtual int64_t positions_needed(const Sequence& seq, int k) { return 0; }
  virtual int64_t free_positions() const { return INT64_MAX; }
  // Its KV cache, for metrics; null when it has none.
  virtual const KVCache* cache() const { return nullptr; }
  // Whether each drafted token costs a model forward step (adaptive K uses the
  // measured cost either way; a free drafter is still charged its real time).
  virtual bool uses_model() const = 0;
};

}  // namespace tandem
