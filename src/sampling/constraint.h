// A constraint on the tokens a request may generate (a grammar, a JSON schema):
// a state machine over token ids, advanced by every token the request emits.
// Decoding masks each position's logits with the state the tokens before it
// reached, so the request samples from the constrained distribution (the
// target's, renormalised over the allowed tokens). Speculative decoding masks a
// draft model's q the same way, cuts lookups at the first token the state
// disallows, and advances a fork of the state through the drafts as it verifies
// them: rejection sampling then keeps the constrained distribution exactly, and
// greedy output is the same with and without speculation.
#pragma once
#include <memory>

namespace tandem {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // An independent copy of the current state.
  virtual std::unique_ptr<TokenConstraint> fork() const = 0;
  // Set logits[t] to -infinity for every token t not allowed next. Returns
  // whether any token is allowed (false: the constraint is stuck, a bug in it).
  virtual bool mask(float* logits, int n_vocab) const = 0;
  // Whether `token` is allowed next.
  virtual bool allows(int token) const = 0;
  // Advance the state by an allowed token.
  virtual void advance(int token) = 0;
};

}  // namespace tandem
