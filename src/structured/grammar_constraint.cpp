#include "structured/grammar_constraint.h"

#include "core/error.h"
#include "structured/token_mask.h"

namespace tandem::structured {

GrammarConstraint::GrammarConstraint(GrammarMatcher matcher) : matcher_(std::move(matcher)) {}

std::shared_ptr<const GrammarConstraint> GrammarConstraint::start(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocab) {
  return std::make_shared<GrammarConstraint>(GrammarMatcher(std::move(grammar), std::move(vocab)));
}

std::unique_ptr<TokenConstraint> GrammarConstraint::fork() const {
  return std::make_unique<GrammarConstraint>(matcher_.fork());
}

bool GrammarConstraint::mask(float* logits, int n_vocab) const {
  const TokenMask& allowed = matcher_.allowed_mask();
  apply_token_mask(allowed, logits, n_vocab);
  for (int w = 0; w < allowed.n_words(); ++w)
    if (allowed.words()[w]) return true;
  return false;
}

bool GrammarConstraint::allows(int token) const { return matcher_.is_allowed(token); }

void GrammarConstraint::advance(int token) {
  check(matcher_.accept(token), "token {} does not follow the grammar here", token);
}

}  // namespace tandem::structured
