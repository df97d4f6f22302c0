// Byte patterns of JSON's lexical pieces as constrained output spells them:
// bounded whitespace, strings (with length bounds), numbers, integers in a
// range, and literal values.
//
// Bounds that keep a model from looping: whitespace between two tokens of the
// document is one run, and that run is nothing, one space, or one newline
// followed by at most kMaxIndent spaces or tabs (the shape of llama.cpp's JSON
// grammar): compact and pretty-printed documents fit, blank lines do not, so a
// weak model cannot spend its tokens on empty lines inside an object. At most
// kMaxIntegerDigits
// digits before a decimal point, kMaxFractionDigits after it and
// kMaxExponentDigits in an exponent. Integers in a range are spelled without
// leading zeros and never as "-0".
#pragma once
#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "structured/pattern.h"

namespace tandem::structured {

inline constexpr int kMaxIndent = 20;
inline constexpr int kMaxIntegerDigits = 16;
inline constexpr int kMaxFractionDigits = 16;
inline constexpr int kMaxExponentDigits = 2;
// The largest integer magnitude with kMaxIntegerDigits digits.
inline constexpr int64_t kMaxIntegerMagnitude = 9999999999999999;

// The whitespace of one gap between tokens: "", " ", or "\n" and 0..kMaxIndent
// spaces or tabs. Callers put one such run in each gap, never two in a row.
Pattern json_whitespace();
// A string literal with min..max characters (max -1: unbounded); characters are
// Unicode code points, an escape counting as the character it stands for.
Pattern json_string(int min_chars = 0, int max_chars = -1);
// The content between the quotes of a string whose characters match `content`.
Pattern json_quoted(const Pattern& content);
Pattern json_number();
// Integers in [lo, hi] (each bound clamped to +-kMaxIntegerMagnitude).
// Throws tandem::Error when lo > hi.
Pattern json_integer(std::optional<int64_t> lo, std::optional<int64_t> hi);
// The digits of the integers in [lo, hi], 0 <= lo <= hi, without leading zeros.
Pattern json_digits_range(int64_t lo, int64_t hi);
Pattern json_boolean();
// A value spelled as nlohmann::json's compact dump() spells it.
Pattern json_literal(const nlohmann::json& value);

}  // namespace tandem::structured
