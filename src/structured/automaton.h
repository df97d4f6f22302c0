// From a Pattern to a deterministic automaton over byte classes and rule calls
// (Thompson construction, then subset construction, then removal of states from
// which no accepting state can be reached, so that every live state can still
// complete a match).
#pragma once
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "structured/byte_set.h"
#include "structured/pattern.h"

namespace tandem::structured {

// The coarsest partition of the 256 byte values such that every byte set in use
// is a union of classes: automata then need one transition per class.
struct ByteClasses {
  std::array<uint8_t, 256> class_of{};
  std::vector<uint8_t> representative;  // a byte of each class
  int count() const { return static_cast<int>(representative.size()); }

  static ByteClasses partition(const std::vector<ByteSet>& sets);
};

struct RuleDfa {
  int n_states = 0;                                     // state 0 is the start
  std::vector<int32_t> next;                            // (state, class) -> state, -1 when dead
  std::vector<uint8_t> accepting;                       // (state)
  std::vector<std::vector<std::pair<int, int>>> calls;  // (state) -> (callee rule, state after it)
};

// Throws tandem::Error when the automaton would exceed max_states states or
// when the pattern matches nothing.
RuleDfa build_rule_dfa(const Pattern& p, const ByteClasses& classes, int max_states);

}  // namespace tandem::structured
