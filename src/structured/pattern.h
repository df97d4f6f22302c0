// Regular expressions over bytes whose symbols may also be calls of grammar
// rules: the language each grammar rule is written in. A schema compiles to one
// Pattern per rule (an object, an array, ...); scalar values (strings, numbers,
// literals) are plain byte patterns inlined where they occur, nested objects and
// arrays are calls, so that recursion and sharing go through rules.
//
// Patterns are immutable values that share their sub-patterns.
#pragma once
#include <memory>
#include <string_view>
#include <vector>

#include "structured/byte_set.h"

namespace tandem::structured {

class Pattern {
 public:
  enum class Kind {
    Empty,    // matches the empty string
    Bytes,    // one byte from a set
    Call,     // a whole match of rule `rule`
    Seq,      // items in order
    Alt,      // any one of items
    Repeat,   // items[0] repeated min..max times (max -1: unbounded)
    Members,  // items in order, each present or (when not required) absent;
              // present ones separated by `separator`, min..max of them
  };

  Pattern();  // Empty
  static Pattern bytes(const ByteSet& set);
  static Pattern byte(uint8_t b) { return bytes(ByteSet::of(b)); }
  static Pattern literal(std::string_view text);
  static Pattern call(int rule);
  static Pattern seq(std::vector<Pattern> items);
  static Pattern alt(std::vector<Pattern> items);
  static Pattern repeat(Pattern p, int min, int max);
  static Pattern optional(Pattern p) { return repeat(std::move(p), 0, 1); }
  static Pattern star(Pattern p) { return repeat(std::move(p), 0, -1); }
  // Members with min_present..max_present of them present (max -1: any number).
  static Pattern members(std::vector<Pattern> items, std::vector<bool> required, Pattern separator,
                         int min_present = 0, int max_present = -1);

  Kind kind() const;
  const ByteSet& byte_set() const;  // Bytes
  int rule() const;                 // Call
  const std::vector<Pattern>& items() const;
  int min() const;  // Repeat: repetitions; Members: members present
  int max() const;
  const std::vector<bool>& required() const;  // Members
  const Pattern& separator() const;           // Members

  // Every byte set used anywhere in the pattern (to compute byte classes).
  void collect_byte_sets(std::vector<ByteSet>& out) const;

 private:
  struct Node;
  explicit Pattern(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  std::shared_ptr<const Node> node_;
};

}  // namespace tandem::structured
