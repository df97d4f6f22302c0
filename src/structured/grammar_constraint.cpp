#include "structured/grammar_constraint.h"

#include "core/error.h"

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
  matcher_.fill_allowed(scratch_);
  apply_token_mask(scratch_, logits, n_vocab);
  for (int w = 0; w < scratch_.n_words(); ++w)
    if (scratch_.words()[w]) return true;
  return false;
}

bool GrammarConstraint::allows(int token) const { return matcher_.is_allowed(token); }

void GrammarConstraint::advance(int token) {
  check(matcher_.accept(token), "token {} does not follow the grammar here", token);
}

}  // namespace tandem::structured
