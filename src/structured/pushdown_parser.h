// Parsing bytes with a Grammar: a configuration is the state inside the
// current rule's automaton plus the stack of callers (each the state its rule
// resumes in). Stacks are interned, so that a stack is one number, equal stacks
// are equal numbers and a configuration copies in 8 bytes. A parser state is
// the sorted set of configurations still possible (more than one only where
// the grammar is ambiguous so far, e.g. between alternatives of anyOf).
//
// Not thread-safe: interning mutates the pool. One parser serves a matcher and
// its copies on one thread.
#pragma once
#include <compare>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "structured/grammar.h"

namespace tandem::structured {

struct Config {
  int32_t below = -1;  // interned stack of the callers, -1 when this is the root rule
  int32_t state = 0;   // a state of the grammar
  auto operator<=>(const Config&) const = default;
};

using ParserState = std::vector<Config>;  // sorted, no duplicates

class PushdownParser {
 public:
  explicit PushdownParser(std::shared_ptr<const Grammar> g);
  const Grammar& grammar() const { return *grammar_; }

  ParserState initial() const { return {{-1, grammar_->root_start()}}; }
  // `in` and every configuration reachable from it without reading a byte: by
  // ending the current rule (the caller resumes) or calling a rule.
  void closure(const Config* begin, const Config* end, std::vector<Config>& out);
  // The configurations after reading byte b (sorted, no duplicates); empty
  // when b is not allowed.
  void step(const Config* begin, const Config* end, uint8_t b, std::vector<Config>& out);
  // Whether the document can end here: the root rule in an accepting state.
  bool complete(const Config* begin, const Config* end);

 private:
  struct Frame {
    int32_t below, resume;
  };
  int32_t push(int32_t below, int32_t resume);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> index_;
  std::vector<Config> scratch_;
};

}  // namespace tandem::structured
