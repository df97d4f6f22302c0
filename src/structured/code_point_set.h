// Sets of Unicode code points (the character classes of regular expressions)
// and their spelling as bytes: plain UTF-8, or as the characters of a JSON
// string literal, where '"', '\' and control characters must be escaped.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "structured/pattern.h"

namespace tandem::structured {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

class CodePointSet {
 public:
  CodePointSet() = default;
  static CodePointSet of(uint32_t cp) { return range(cp, cp); }
  static CodePointSet range(uint32_t lo, uint32_t hi);
  static CodePointSet all();  // every Unicode scalar value (no surrogates)

  void add(uint32_t lo, uint32_t hi);
  void add(const CodePointSet& o);
  CodePointSet complement() const;  // within all()
  CodePointSet minus(const CodePointSet& o) const;
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  // Sorted, disjoint, non-adjacent inclusive ranges.
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  void normalize();
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

// One character from `set`, as UTF-8 bytes (surrogate code points are never encoded).
Pattern utf8_char(const CodePointSet& set);
// One character from `set` as it appears inside a JSON string literal: as its
// UTF-8 bytes, or for '"', '\' and U+0000-U+001F as its shortest escape
// (\", \\, \n, ..., \u001f): the spelling JSON serializers use.
Pattern json_string_char(const CodePointSet& set);
// One character of any JSON string literal, spelled any way JSON allows (escapes
// \" \\ \/ \b \f \n \r \t and \uXXXX, surrogate pairs only as valid pairs).
Pattern json_any_string_char();

}  // namespace tandem::structured
