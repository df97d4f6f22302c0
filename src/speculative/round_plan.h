// A round's plan: what the draft policy decides for every request (draft length,
// cache positions), within the KV room the engine states. The policy alone makes
// it; the speculative runner carries it out as it is.
#pragma once
#include <span>
#include <vector>

#include "speculative/draft_context.h"

namespace tandem {

// What the policy is told of one request in a round.
struct RoundRequest {
  DraftContext ctx;   // ctx.id keys the policy's state for the request
  int pending = 1;    // tokens the verify pass feeds besides drafts (usually 1)
  int room = 0;       // the most it may draft by its limits (token limit, KV room); 0: none
  int remaining = 1;  // tokens it may still generate
  // Cache positions it may still write: what bounds a tree's nodes beside its
  // main chain (they emit no more tokens than the chain, so `room` does not).
  int kv_room = 0;
};

// The KV cache room of a round, as the engine states it: whether its caches can
// hold what a plan would write.
class KvBudget {
 public:
  virtual ~KvBudget() = default;
  // positions[i]: cache positions request i writes beyond its tokens (its
  // drafts, tree nodes included); drafted[i]: the tokens its draft model drafts
  // (0: none), which the draft model's cache must hold too.
  virtual bool fits(std::span<const int> positions, std::span<const int> drafted) const = 0;
};

struct RoundPlan {
  std::vector<RoundRequest> requests;  // what the policy was told, one per request
  // The requests the engine is serving: those decoding (requests) and those
  // whose prompts are still prefilling (0: requests.size()). The rate guard
  // judges drafting per load, not per decoding batch: while a new request
  // prefills, its batch decodes one request short for a round, and judged on
  // its own, that batch size drafted in such rounds (paying draft catch-ups)
  // where the full batch had found drafting to lose.
  int load = 0;
  std::vector<int> k;          // main-chain draft length (0: a plain decode step)
  std::vector<int> positions;  // cache positions each may write beyond its tokens

  int guard_load() const { return load > 0 ? load : static_cast<int>(requests.size()); }
  bool drafts() const {
    for (int x : k)
      if (x > 0) return true;
    return false;
  }
};

}  // namespace tandem
