#include "structured/tool_call_constraint.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "structured/token_mask.h"

namespace tandem::structured {
namespace {

constexpr float kMasked = -INFINITY;

bool any_allowed(const TokenMask& m) {
  for (int w = 0; w < m.n_words(); ++w)
    if (m.words()[w]) return true;
  return false;
}

}  // namespace

std::shared_ptr<const ToolCallTokens> find_tool_call_tokens(const TokenVocabulary& vocab, int open,
                                                            int close,
                                                            std::vector<std::string> fence_open) {
  auto t = std::make_shared<ToolCallTokens>();
  t->open = open;
  t->close = close;
  t->fence_open = std::move(fence_open);
  for (int id = 0; id < vocab.n_ids(); ++id) {  // ascending: the lists stay sorted
    const std::string* b = vocab.bytes(id);
    if (!b || b->empty()) continue;
    if (b->size() <= 2 && b->find_first_not_of('\n') == std::string::npos)
      t->separators.push_back(id);
    if ((*b)[0] == '{') t->json_openers.push_back(id);
  }
  return t;
}

std::shared_ptr<const ToolCallConstraint> ToolCallConstraint::start(
    const ToolCallGrammars& g, std::shared_ptr<const TokenVocabulary> vocab,
    std::shared_ptr<const ToolCallTokens> tokens, Start start, bool parallel) {
  Matchers m;
  if (g.marked && tokens->open >= 0) m.marked.emplace(g.marked, vocab);
  if (g.bare) m.bare.emplace(g.bare, vocab);
  if (g.fenced && !tokens->fence_open.empty()) m.fenced.emplace(g.fenced, vocab);
  check(m.marked || m.bare, "a tool-call constraint needs a marked or a bare call's grammar");
  Phase phase;
  if (start == Start::Call)
    phase = m.marked ? Phase::Open : Phase::Body;
  else
    phase = m.bare ? Phase::FreeStart : Phase::Free;
  auto c = std::make_shared<ToolCallConstraint>(std::make_shared<const Matchers>(std::move(m)),
                                                std::move(tokens), phase, parallel);
  if (phase == Phase::Body || phase == Phase::FreeStart) c->body_ = c->fresh_->bare->restart();
  return c;
}

ToolCallConstraint::ToolCallConstraint(std::shared_ptr<const Matchers> fresh,
                                       std::shared_ptr<const ToolCallTokens> tokens, Phase phase,
                                       bool parallel)
    : fresh_(std::move(fresh)), tokens_(std::move(tokens)), phase_(phase), parallel_(parallel) {}

const TokenVocabulary& ToolCallConstraint::vocab() const {
  return fresh_->marked ? fresh_->marked->vocab() : fresh_->bare->vocab();
}

// A fork shares the start matchers (they never advance) and forks the current call.
std::unique_ptr<TokenConstraint> ToolCallConstraint::fork() const {
  auto c = std::make_unique<ToolCallConstraint>(fresh_, tokens_, phase_, parallel_);
  if (body_) c->body_ = body_->fork();
  c->marked_ = marked_;
  c->separators_ = separators_;
  c->tail_ = tail_;
  return c;
}

bool ToolCallConstraint::is_opener(int token) const {
  return std::binary_search(tokens_->json_openers.begin(), tokens_->json_openers.end(), token);
}

bool ToolCallConstraint::is_separator(int token) const {
  return std::binary_search(tokens_->separators.begin(), tokens_->separators.end(), token);
}

void ToolCallConstraint::open(const std::optional<GrammarMatcher>& fresh, bool marked) {
  body_ = fresh->restart();
  marked_ = marked;
  phase_ = Phase::Body;
}

bool ToolCallConstraint::open_fenced(int token) {
  if (!fresh_->fenced) return false;
  const std::string* bytes = vocab().bytes(token);
  const size_t before = tail_.size();
  tail_ += bytes ? *bytes : std::string();
  // A fence that ends in this token's bytes opens the call; the bytes after it
  // must begin the body (else the fence is text, as in a code block of prose).
  for (const std::string& fence : tokens_->fence_open) {
    const size_t from = before >= fence.size() ? before - fence.size() + 1 : 0;
    const size_t at = tail_.find(fence, from);
    if (at == std::string::npos) continue;
    GrammarMatcher m = fresh_->fenced->restart();
    const std::string_view rest = std::string_view(tail_).substr(at + fence.size());
    if (!rest.empty() && !m.accept_bytes(rest)) continue;
    body_ = std::move(m);
    marked_ = false;
    phase_ = Phase::Body;
    tail_.clear();
    return true;
  }
  constexpr size_t kKeep = 16;  // longer than any fence
  if (tail_.size() > kKeep) tail_.erase(0, tail_.size() - kKeep);
  return false;
}

bool ToolCallConstraint::mask(float* logits, int n_vocab) const {
  switch (phase_) {
    case Phase::Free:
      return true;
    case Phase::FreeStart:
      // Free text may start with anything but '{'; a '{' opens the bare call and must fit it.
      for (int id : tokens_->json_openers)
        if (id < n_vocab && !body_->is_allowed(id)) logits[id] = kMasked;
      return true;
    case Phase::Open: {
      const int open = tokens_->open;
      const float keep = open < n_vocab ? logits[open] : kMasked;
      std::fill(logits, logits + n_vocab, kMasked);
      if (open < n_vocab) logits[open] = keep;
      return open < n_vocab;
    }
    case Phase::Body: {
      const TokenMask& allowed = body_->allowed_mask();
      if (!marked_) {  // the grammar ends the call and the output
        apply_token_mask(allowed, logits, n_vocab);
        return any_allowed(allowed);
      }
      // A marked call's grammar ends the body; the close marker follows, not the end.
      const bool closing = body_->is_complete();
      const int close = tokens_->close;
      const float close_logit = closing && close < n_vocab ? logits[close] : kMasked;
      apply_token_mask(allowed, logits, n_vocab);
      for (int id : vocab().eog_ids())
        if (id < n_vocab) logits[id] = kMasked;
      if (closing) {
        if (close < n_vocab) logits[close] = close_logit;
        return close < n_vocab;
      }
      return any_allowed(allowed);
    }
    case Phase::After: {
      // The end of the output, or (parallel calls) a few newlines and another call.
      const bool more = parallel_;
      for (int id = 0; id < n_vocab; ++id) {
        const bool ok =
            is_eog(id) ||
            (more && (id == tokens_->open || (separators_ < kMaxSeparators && is_separator(id))));
        if (!ok) logits[id] = kMasked;
      }
      return true;
    }
  }
  return false;
}

bool ToolCallConstraint::allows(int token) const {
  switch (phase_) {
    case Phase::Free:
      return true;
    case Phase::FreeStart:
      return !is_opener(token) || body_->is_allowed(token);
    case Phase::Open:
      return token == tokens_->open;
    case Phase::Body:
      if (!marked_) return body_->is_allowed(token);
      if (is_eog(token)) return false;
      if (token == tokens_->close) return body_->is_complete();
      return body_->is_allowed(token);
    case Phase::After:
      if (is_eog(token)) return true;
      if (!parallel_) return false;
      return token == tokens_->open || (is_separator(token) && separators_ < kMaxSeparators);
  }
  return false;
}

void ToolCallConstraint::advance(int token) {
  check(allows(token), "token {} does not follow the tool-call grammar here", token);
  switch (phase_) {
    case Phase::FreeStart:
      if (is_opener(token)) {  // the bare call (body_ is at its start)
        body_->accept(token);
        marked_ = false;
        phase_ = Phase::Body;
        return;
      }
      body_.reset();
      phase_ = Phase::Free;
      [[fallthrough]];  // the first token of free text may open a marked or fenced call
    case Phase::Free:
      if (fresh_->marked && token == tokens_->open)
        open(fresh_->marked, true);
      else
        open_fenced(token);
      return;
    case Phase::Open:
      open(fresh_->marked, true);
      return;
    case Phase::Body:
      if (marked_ && token == tokens_->close) {
        phase_ = Phase::After;
        separators_ = 0;
      } else {
        body_->accept(token);
      }
      return;
    case Phase::After:
      if (token == tokens_->open)
        open(fresh_->marked, true);
      else if (is_separator(token))
        ++separators_;
      return;
  }
}

}  // namespace tandem::structured
