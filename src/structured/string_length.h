// The characters of a JSON string whose length is bounded (minLength,
// maxLength), counted without one automaton state per count: a length is
// written in base kLengthBase, and a digit d at position k is d calls of a rule
// that reads exactly kLengthBase^k characters (position 0: d characters
// inline). Lengths in [lo, hi] are then a digit-range pattern (like the
// integer ranges of json_lexical.cpp) over those repetitions, so the automata
// grow with the number of digits, not with hi; a parser holds about one
// configuration per digit position while it cannot yet tell where the string
// ends.
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "structured/grammar.h"
#include "structured/pattern.h"

namespace tandem::structured {

inline constexpr int kLengthBase = 32;
inline constexpr int64_t kMaxStringLength = int64_t{1} << 20;  // larger bounds count as this

class StringLengths {
 public:
  // Rules for the chunks are declared in `b` when first needed.
  explicit StringLengths(GrammarBuilder& b) : b_(b) {}

  // The content (between the quotes) of strings of lo..hi characters (hi -1:
  // unbounded), an escape counting as the character it stands for. Bounds
  // above kMaxStringLength are lowered to it.
  Pattern content(int64_t lo, int64_t hi);

 private:
  Pattern chunks(int level, int min, int max);  // min..max chunks of kLengthBase^level characters
  Pattern any_shorter(int level);               // any length below kLengthBase^(level + 1)
  Pattern at_least(const std::vector<int>& digits, int level);
  Pattern at_most(const std::vector<int>& digits, int level);
  Pattern between(const std::vector<int>& lo, const std::vector<int>& hi, int level);

  GrammarBuilder& b_;
  std::vector<int> chunk_rules_;  // [k]: the rule of kLengthBase^k characters, k >= 1; -1 unmade
  std::map<std::pair<int, int>, int> run_rules_;  // (min, max) -> rule of min..max characters
};

}  // namespace tandem::structured
