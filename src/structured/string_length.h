// JSON strings whose length is bounded (minLength, maxLength). Up to
// kMaxInlineLength, one automaton state per count (in a shared rule of its own
// from kLengthBase on). Above, counted without one state per count: a length
// is written in base kLengthBase, and a digit d at position k >= 1 is d calls
// of a rule that reads exactly kLengthBase^k characters; the last digit is a
// call of a rule that reads that many characters and the closing quote.
// Lengths in [lo, hi] are then a digit-range pattern (like the integer ranges
// of json_lexical.cpp) over those calls, so the automata grow with the number
// of digits, not with hi. No rule may end inside the string except after a
// whole chunk or the closing quote, so masks there are cached per state (a
// rule that may end at every character would make every mask walk the
// vocabulary with the whole parser stack).
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "structured/grammar.h"
#include "structured/pattern.h"

namespace tandem::structured {

inline constexpr int kLengthBase = 32;
inline constexpr int kMaxInlineLength = 256;                   // up to it: one state per count
inline constexpr int64_t kMaxStringLength = int64_t{1} << 20;  // larger bounds count as this

class StringLengths {
 public:
  // Rules are declared in `b` when first needed, and shared.
  explicit StringLengths(GrammarBuilder& b) : b_(b) {}

  // A string literal, quotes included, of lo..hi characters (hi -1:
  // unbounded), an escape counting as the character it stands for. Bounds
  // above kMaxStringLength are lowered to it.
  Pattern quoted(int64_t lo, int64_t hi);

 private:
  Pattern chunks(int level, int min, int max);  // min..max chunks of kLengthBase^level, level >= 1
  Pattern last(int min, int max);               // min..max characters and the closing quote
  Pattern digit(int level, int min, int max);   // chunks, or the last characters at level 0
  Pattern any_shorter(int level);               // any length below kLengthBase^(level + 1)
  Pattern at_least(const std::vector<int>& digits, int level);
  Pattern at_most(const std::vector<int>& digits, int level);
  Pattern between(const std::vector<int>& lo, const std::vector<int>& hi, int level);

  GrammarBuilder& b_;
  std::vector<int> chunk_rules_;                    // [k]: kLengthBase^k characters; -1 unmade
  std::map<std::pair<int, int>, int> last_rules_;   // (min, max) -> characters and the quote
  std::map<std::pair<int, int>, int> whole_rules_;  // (min, max) -> a string up to kMaxInlineLength
};

}  // namespace tandem::structured
