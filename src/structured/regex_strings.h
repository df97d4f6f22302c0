// Regexes (pattern, patternProperties, format) as the strings a schema
// generates: how long those strings are, and a bound on the automaton of an
// unanchored regex.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "structured/pattern.h"

namespace tandem::structured {

// An unanchored regex matches anywhere in the string, and its automaton may
// grow exponentially ("anything" before the match keeps every partial match
// alive): past this many states, string_regex anchors it at the start.
inline constexpr int kMaxRegexStates = 2048;

// The content (between the quotes) of the strings `regex` matches (regex.h),
// or, for an unanchored regex whose automaton would pass kMaxRegexStates, of
// the strings that start with a match (fewer strings, all valid). Throws
// tandem::Error as compile_json_string_regex does.
Pattern string_regex(const std::string& regex);

// The least and greatest number of characters of the strings of a content
// pattern without calls (a UTF-8 sequence or an escape counting as one), and
// whether it reads only printable ASCII other than '"' and '\'.
struct RegexLengths {
  int64_t min = 0, max = 0;  // max -1: unbounded
  bool ascii = true;
};
RegexLengths regex_lengths(const Pattern& content);

// The content pattern with each unbounded repetition bounded (at most k more
// than its minimum, k as large as fits) so that no string is longer than
// max_chars characters: a subset of its strings, for maxLength beside a
// pattern. nullopt when even the shortest forms are too long.
std::optional<Pattern> bound_length(const Pattern& content, int64_t max_chars);

}  // namespace tandem::structured
