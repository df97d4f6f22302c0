// What a drafter may see of one request: the text so far and how it samples.
// Drafters know nothing else of the engine's requests.
#pragma once
#include <cstdint>
#include <span>

#include "sampling/constraint.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"

namespace tandem {

struct DraftContext {
  int id = -1;                  // stable while the request lives: keys per-request state
  std::span<const int> tokens;  // prompt and accepted tokens (the last not yet verified)
  const SamplingParams* sampling = nullptr;  // the request's transforms shape q as they shape p
  Rng* rng = nullptr;  // the request's own generator (sampled drafts draw from it)
  // The request's constraint after `tokens` (null: none): drafts must keep to
  // it (a draft model masks its logits with it, a lookup is cut where it leaves it).
  const TokenConstraint* constraint = nullptr;
  // Whose text the request may be drafted from (suffix_drafter.h): the server
  // derives it from the request's API key; requests of one tenant never get
  // drafts taken from another tenant's prompts or outputs.
  uint64_t tenant = 0;
};

}  // namespace tandem
