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

class KVCache;
class Sequence;

struct Draft {
  std::vector<int> tokens;
  // q[i]: the distribution tokens[i] was sampled from, after the request's own
  // sampling transforms. Empty when the drafter is deterministic or the request
  // is greedy: q is then a point mass on each token.
  std::vector<SamplingDistribution> q;

  void clear() {
    tokens.clear();
    q.clear();
  }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Propose up to k[i] tokens continuing seqs[i]->tokens() into out[i] (fewer, even
  // none, when the drafter has nothing good to offer or no room).
  virtual void propose(const std::vector<Sequence*>& seqs, const std::vector<int>& k,
                       std::vector<Draft>& out) = 0;
  // A round ended and the sequence's tokens changed: drop any state built on
  // drafts that were rejected.
  virtual void sync(const Sequence& seq) {}
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
