// The `pattern` keyword of JSON Schema: an ECMA-262 regular expression that a
// string must match somewhere (search, not whole-string, semantics unless
// anchored with ^ and $), compiled to the bytes of the JSON string literal's
// content. The supported subset: literals, '.', classes [...] with ranges and
// negation, \d \D \w \W \s \S and character escapes (\n, \t, \xHH, \uHHHH,
// \u{...}, escaped punctuation), groups (...), (?:...), (?<name>...),
// alternation, the quantifiers * + ? {n} {n,} {n,m} (lazy forms alike, at most
// kMaxRegexRepeat), and ^ / $ at the start / end of the expression or of a
// top-level alternative. Back-references, lookaround, word boundaries, Unicode
// property escapes and anchors elsewhere are refused.
#pragma once
#include <string_view>

#include "structured/pattern.h"

namespace tandem::structured {

inline constexpr int kMaxRegexRepeat = 256;

// Throws tandem::Error naming the feature and its offset in the expression.
Pattern compile_json_string_regex(std::string_view regex);

}  // namespace tandem::structured
