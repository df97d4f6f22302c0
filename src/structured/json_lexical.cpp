#include "structured/json_lexical.h"

#include <string>

#include "core/error.h"
#include "structured/code_point_set.h"

namespace tandem::structured {
namespace {

Pattern digit() { return Pattern::bytes(ByteSet::range('0', '9')); }

Pattern digit_range(char lo, char hi) {
  return Pattern::bytes(ByteSet::range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)));
}

// Digit strings of equal length from a to b (a <= b), leading zeros allowed.
Pattern same_length(const std::string& a, const std::string& b) {
  if (a.empty()) return Pattern();
  if (a == b) return Pattern::literal(a);
  const std::string ra = a.substr(1), rb = b.substr(1);
  if (a[0] == b[0])
    return Pattern::seq({Pattern::byte(static_cast<uint8_t>(a[0])), same_length(ra, rb)});
  const size_t rest = ra.size();
  // Where the rest of a is all zeros (of b all nines) its first digit joins the
  // middle range: that keeps the pattern linear in the number of digits.
  const bool low_full = ra == std::string(rest, '0');
  const bool high_full = rb == std::string(rest, '9');
  const char first = low_full ? a[0] : static_cast<char>(a[0] + 1);
  const char last = high_full ? b[0] : static_cast<char>(b[0] - 1);
  std::vector<Pattern> alts;
  if (!low_full)
    alts.push_back(Pattern::seq(
        {Pattern::byte(static_cast<uint8_t>(a[0])), same_length(ra, std::string(rest, '9'))}));
  if (first <= last)
    alts.push_back(
        Pattern::seq({digit_range(first, last),
                      Pattern::repeat(digit(), static_cast<int>(rest), static_cast<int>(rest))}));
  if (!high_full)
    alts.push_back(Pattern::seq(
        {Pattern::byte(static_cast<uint8_t>(b[0])), same_length(std::string(rest, '0'), rb)}));
  return Pattern::alt(std::move(alts));
}

int64_t pow10(int n) {
  int64_t v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

// Non-negative integers in [lo, hi] without leading zeros.
Pattern non_negative_range(int64_t lo, int64_t hi) {
  std::vector<Pattern> alts;
  const int lo_digits = static_cast<int>(std::to_string(lo).size());
  const int hi_digits = static_cast<int>(std::to_string(hi).size());
  for (int len = lo_digits; len <= hi_digits; ++len) {
    const int64_t a = std::max(lo, len == 1 ? 0 : pow10(len - 1));
    const int64_t b = std::min(hi, pow10(len) - 1);
    if (a <= b) alts.push_back(same_length(std::to_string(a), std::to_string(b)));
  }
  return Pattern::alt(std::move(alts));
}

}  // namespace

Pattern json_whitespace() {
  ByteSet indent;
  indent.add(' ');
  indent.add('\t');
  return Pattern::alt({Pattern(), Pattern::byte(' '),
                       Pattern::seq({Pattern::byte('\n'),
                                     Pattern::repeat(Pattern::bytes(indent), 0, kMaxIndent)})});
}

Pattern json_quoted(const Pattern& content) {
  return Pattern::seq({Pattern::byte('"'), content, Pattern::byte('"')});
}

Pattern json_string(int min_chars, int max_chars) {
  return json_quoted(Pattern::repeat(json_any_string_char(), min_chars, max_chars));
}

Pattern json_number() {
  const Pattern integer_part = Pattern::alt(
      {Pattern::byte('0'),
       Pattern::seq({digit_range('1', '9'), Pattern::repeat(digit(), 0, kMaxIntegerDigits - 1)})});
  ByteSet e, sign;
  e.add('e');
  e.add('E');
  sign.add('+');
  sign.add('-');
  return Pattern::seq({
      Pattern::optional(Pattern::byte('-')),
      integer_part,
      Pattern::optional(
          Pattern::seq({Pattern::byte('.'), Pattern::repeat(digit(), 1, kMaxFractionDigits)})),
      Pattern::optional(Pattern::seq({Pattern::bytes(e), Pattern::optional(Pattern::bytes(sign)),
                                      Pattern::repeat(digit(), 1, kMaxExponentDigits)})),
  });
}

Pattern json_integer(std::optional<int64_t> lo_opt, std::optional<int64_t> hi_opt) {
  const int64_t lo = std::max(lo_opt.value_or(-kMaxIntegerMagnitude), -kMaxIntegerMagnitude);
  const int64_t hi = std::min(hi_opt.value_or(kMaxIntegerMagnitude), kMaxIntegerMagnitude);
  check(lo <= hi, "no integer lies in [{}, {}]", lo, hi);
  std::vector<Pattern> alts;
  if (lo < 0)  // negative values: '-' and a magnitude in [max(1, -hi), -lo]
    alts.push_back(
        Pattern::seq({Pattern::byte('-'), non_negative_range(std::max<int64_t>(1, -hi), -lo)}));
  if (hi >= 0) alts.push_back(non_negative_range(std::max<int64_t>(0, lo), hi));
  return Pattern::alt(std::move(alts));
}

Pattern json_digits_range(int64_t lo, int64_t hi) { return non_negative_range(lo, hi); }

Pattern json_boolean() {
  return Pattern::alt({Pattern::literal("true"), Pattern::literal("false")});
}

Pattern json_literal(const nlohmann::json& value) {
  return Pattern::literal(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict));
}

}  // namespace tandem::structured
