#include "structured/grammar_matcher.h"

#include "core/error.h"
#include "structured/mask_computer.h"

namespace tandem::structured {

struct GrammarMatcher::Shared {
  Shared(std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenVocabulary> v)
      : parser(std::move(g)), masks(parser, std::move(v)) {}
  PushdownParser parser;
  MaskComputer masks;
  std::vector<Config> a, b;  // advance(): a holds the state reached
  TokenMask allowed;         // allowed_mask()
};

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const TokenVocabulary> vocab) {
  check(grammar && vocab, "internal: a matcher needs a grammar and a vocabulary");
  shared_ = std::make_shared<Shared>(std::move(grammar), std::move(vocab));
  history_.push_back(shared_->parser.initial());
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<Shared> shared, ParserState state)
    : shared_(std::move(shared)) {
  history_.push_back(std::move(state));
}

GrammarMatcher::~GrammarMatcher() = default;
GrammarMatcher::GrammarMatcher(const GrammarMatcher&) = default;
GrammarMatcher& GrammarMatcher::operator=(const GrammarMatcher&) = default;
GrammarMatcher::GrammarMatcher(GrammarMatcher&&) noexcept = default;
GrammarMatcher& GrammarMatcher::operator=(GrammarMatcher&&) noexcept = default;

const TokenVocabulary& GrammarMatcher::vocab() const { return shared_->masks.vocab(); }

void GrammarMatcher::fill_allowed(TokenMask& mask) const {
  shared_->masks.fill(history_.back(), mask);
  if (history_.back().empty())  // ended: it stays ended
    for (int id : vocab().eog_ids()) mask.set(id);
}

const TokenMask& GrammarMatcher::allowed_mask() const {
  fill_allowed(shared_->allowed);
  return shared_->allowed;
}

bool GrammarMatcher::advance(std::string_view bytes) const {
  Shared& s = *shared_;
  s.a = history_.back();
  for (char c : bytes) {
    s.parser.step(s.a.data(), s.a.data() + s.a.size(), static_cast<uint8_t>(c), s.b);
    if (s.b.empty()) return false;
    s.a.swap(s.b);
  }
  return true;
}

bool GrammarMatcher::is_allowed(int token) const {
  const ParserState& cur = history_.back();
  if (cur.empty()) return vocab().is_eog(token);
  if (vocab().is_eog(token)) return is_complete();
  const std::string* bytes = vocab().bytes(token);
  if (!bytes) return false;
  return advance(*bytes);
}

bool GrammarMatcher::accept(int token) {
  const ParserState& cur = history_.back();
  if (vocab().is_eog(token)) {
    if (!cur.empty() && !is_complete()) return false;
    history_.emplace_back();  // ended
    return true;
  }
  const std::string* bytes = vocab().bytes(token);
  if (!bytes) return false;
  return accept_bytes(*bytes);
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (history_.back().empty()) return false;
  if (!advance(bytes)) return false;
  history_.push_back(shared_->a);
  return true;
}

bool GrammarMatcher::is_complete() const {
  const ParserState& cur = history_.back();
  return !cur.empty() && shared_->parser.complete(cur.data(), cur.data() + cur.size());
}

bool GrammarMatcher::is_terminated() const {
  const ParserState& cur = history_.back();
  if (cur.empty()) return true;
  if (!is_complete()) return false;
  // Complete: terminated unless some byte could still extend the document.
  Shared& s = *shared_;
  for (int b = 0; b < 256; ++b) {
    s.parser.step(cur.data(), cur.data() + cur.size(), static_cast<uint8_t>(b), s.b);
    if (!s.b.empty()) return false;
  }
  return true;
}

void GrammarMatcher::rollback(int n) {
  check(n >= 0 && n <= n_steps(), "rollback of {} steps, but only {} can be undone", n, n_steps());
  history_.resize(history_.size() - n);
}

GrammarMatcher GrammarMatcher::fork() const { return GrammarMatcher(shared_, history_.back()); }

GrammarMatcher GrammarMatcher::restart() const {
  return GrammarMatcher(shared_, shared_->parser.initial());
}

}  // namespace tandem::structured
