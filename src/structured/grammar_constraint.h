// A GrammarMatcher as the engine's TokenConstraint (sampling/constraint.h): what
// a request's params.constraint holds so that plain decoding and speculative
// rounds mask the target's p and the draft's q with the grammar, cut lookups at
// the first token it refuses and fork the state through drafts.
//
// Forks share the matcher's caches (GrammarMatcher::fork): a constraint and its
// forks are used on one thread at a time, the engine's.
#pragma once
#include <memory>

#include "sampling/constraint.h"
#include "structured/grammar_matcher.h"

namespace tandem::structured {

class GrammarConstraint final : public TokenConstraint {
 public:
  explicit GrammarConstraint(GrammarMatcher matcher);
  // A constraint in the grammar's start state.
  static std::shared_ptr<const GrammarConstraint> start(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab);

  std::unique_ptr<TokenConstraint> fork() const override;
  bool mask(float* logits, int n_vocab) const override;
  bool allows(int token) const override;
  // Throws tandem::Error for a token the grammar does not allow (callers check allows()).
  void advance(int token) override;

 private:
  GrammarMatcher matcher_;
};

}  // namespace tandem::structured
