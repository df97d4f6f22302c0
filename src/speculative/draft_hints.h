// What a drafter with a model of its own can tell the rest of the engine, beyond
// proposing tokens: the draft policy weighs its costs before measuring them, and
// the scheduler plans its KV cache alongside the target's.
#pragma once
#include <cstdint>

#include "speculative/draft_context.h"

namespace tandem {

class KVCache;

class DraftCostHints {
 public:
  virtual ~DraftCostHints() = default;
  // The tokens the drafter would process before drafting for req, beyond its
  // last one (a draft model's lazy prefill of the prompt, or the text it missed
  // while the request decoded plainly); 0 when there is nothing to catch up.
  virtual int catch_up_tokens(const DraftContext& req) const = 0;
  // Milliseconds that catch-up costs at the rate measured on earlier ones (0
  // when there is nothing to catch up or no measurement yet).
  virtual double catch_up_ms(const DraftContext& req) const = 0;
  // Before its costs are measured, what a draft step and a catch-up token are
  // assumed to cost relative to the target's own (0: no estimate).
  virtual double relative_cost() const = 0;
};

class DraftMemory {
 public:
  virtual ~DraftMemory() = default;
  // The free positions the drafter's cache would consume to propose k tokens
  // for req (may allocate the request's slot).
  virtual int64_t positions_needed(const DraftContext& req, int k) = 0;
  virtual int64_t free_positions() const = 0;
  // Its KV cache, for metrics.
  virtual const KVCache& cache() const = 0;
};

}  // namespace tandem
