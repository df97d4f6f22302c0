// Constrained decoding: which tokens may come next so that the output stays a
// prefix of a document of the grammar, and the state as tokens are accepted.
//
// Speculative decoding advances a matcher through K drafted tokens, asks for a
// mask at each of the K+1 positions and then keeps only the accepted prefix:
// accept() records every state, so rollback(n) undoes the last n tokens in
// O(n), and fork() gives a matcher at the current state that shares the
// caches (copy cost: the current state, usually one 8-byte configuration).
//
// A matcher and its forks share a parser and mask caches: use them from one
// thread at a time. The Grammar and TokenVocabulary they are built from are
// immutable and may be shared freely between matchers on any threads.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "structured/grammar.h"
#include "structured/pushdown_parser.h"
#include "structured/token_mask.h"
#include "structured/token_vocabulary.h"

namespace tandem::structured {

class MaskComputer;

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                 std::shared_ptr<const TokenVocabulary> vocab);
  ~GrammarMatcher();
  GrammarMatcher(const GrammarMatcher&);
  GrammarMatcher& operator=(const GrammarMatcher&);
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // mask = the ids allowed next (resized to the vocabulary's n_ids()). After a
  // complete document only end-of-generation ids (and bytes that continue it,
  // e.g. more digits of a top-level number) are allowed; after an
  // end-of-generation token, only end-of-generation ids again (the document
  // stays ended; a speculative draft may run past its end).
  void fill_allowed(TokenMask& mask) const;
  // fill_allowed() into one mask that the matcher and its forks share (one
  // vocabulary-sized allocation for them all): valid until any of them next
  // computes a mask.
  const TokenMask& allowed_mask() const;
  // Whether one token is allowed next (cheaper than a mask for a single id).
  bool is_allowed(int token) const;
  // Advances by one token; returns false (and changes nothing) when the token
  // is not allowed.
  bool accept(int token);
  // Advances by raw bytes as one step of the history (tests, forced text).
  bool accept_bytes(std::string_view bytes);
  // The output so far is a whole document: an end-of-generation token may come.
  bool is_complete() const;
  // Nothing may follow: an end-of-generation token was accepted, or the
  // document is complete and cannot be extended.
  bool is_terminated() const;

  // Undoes the last n steps (n <= n_steps()).
  void rollback(int n);
  // Steps that rollback() can undo: those since construction or fork().
  int n_steps() const { return static_cast<int>(history_.size()) - 1; }
  // A matcher at the current state with no history, sharing the caches.
  GrammarMatcher fork() const;
  // A matcher at the start of a document, sharing the caches: later requests
  // with the same grammar start from one kept matcher and find its states'
  // masks already walked.
  GrammarMatcher restart() const;

  const TokenVocabulary& vocab() const;

 private:
  struct Shared;
  GrammarMatcher(std::shared_ptr<Shared> shared, ParserState state);
  // Steps the current state through `bytes`; true, with the state reached in
  // shared_->a, when every byte is allowed.
  bool advance(std::string_view bytes) const;

  std::shared_ptr<Shared> shared_;
  std::vector<ParserState> history_;  // back() is the current state; empty state: ended
};

}  // namespace tandem::structured
