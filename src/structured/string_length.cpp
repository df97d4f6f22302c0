#include "structured/string_length.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "structured/code_point_set.h"
#include "structured/json_lexical.h"

namespace tandem::structured {
namespace {

// The base-kLengthBase digits of n, least significant first, `width` of them.
std::vector<int> digits_of(int64_t n, int width) {
  std::vector<int> d(width);
  for (int k = 0; k < width; ++k, n /= kLengthBase) d[k] = static_cast<int>(n % kLengthBase);
  return d;
}

}  // namespace

Pattern StringLengths::chunks(int level, int min, int max) {
  if (max == 0) return Pattern();
  if (static_cast<int>(chunk_rules_.size()) <= level) chunk_rules_.resize(level + 1, -1);
  if (chunk_rules_[level] < 0) {
    const Pattern body = level == 1
                             ? Pattern::repeat(json_any_string_char(), kLengthBase, kLengthBase)
                             : chunks(level - 1, kLengthBase, kLengthBase);
    chunk_rules_[level] =
        b_.declare_rule(fmt::format("string chunk of {} characters", int64_t{1} << (5 * level)));
    b_.define_rule(chunk_rules_[level], body);
  }
  return Pattern::repeat(Pattern::call(chunk_rules_[level]), min, max);
}

Pattern StringLengths::last(int min, int max) {
  auto [it, fresh] = last_rules_.emplace(std::pair{min, max}, -1);
  if (fresh) {
    it->second = b_.declare_rule(fmt::format("{} to {} characters and '\"'", min, max));
    b_.define_rule(it->second, Pattern::seq({Pattern::repeat(json_any_string_char(), min, max),
                                             Pattern::byte('"')}));
  }
  return Pattern::call(it->second);
}

Pattern StringLengths::digit(int level, int min, int max) {
  return level == 0 ? last(min, max) : chunks(level, min, max);
}

Pattern StringLengths::any_shorter(int level) {  // digits level..0 free
  std::vector<Pattern> seq;
  for (int k = level; k >= 0; --k) seq.push_back(digit(k, 0, kLengthBase - 1));
  return Pattern::seq(std::move(seq));
}

// Lengths whose digits level..0 are at least (at most) `d`'s digits there.
Pattern StringLengths::at_least(const std::vector<int>& d, int level) {
  if (level == 0) return last(d[0], kLengthBase - 1);
  std::vector<Pattern> alts{
      Pattern::seq({chunks(level, d[level], d[level]), at_least(d, level - 1)})};
  if (d[level] + 1 <= kLengthBase - 1)
    alts.push_back(
        Pattern::seq({chunks(level, d[level] + 1, kLengthBase - 1), any_shorter(level - 1)}));
  return Pattern::alt(std::move(alts));
}

Pattern StringLengths::at_most(const std::vector<int>& d, int level) {
  if (level == 0) return last(0, d[0]);
  std::vector<Pattern> alts{
      Pattern::seq({chunks(level, d[level], d[level]), at_most(d, level - 1)})};
  if (d[level] >= 1)
    alts.push_back(Pattern::seq({chunks(level, 0, d[level] - 1), any_shorter(level - 1)}));
  return Pattern::alt(std::move(alts));
}

Pattern StringLengths::between(const std::vector<int>& lo, const std::vector<int>& hi, int level) {
  if (level == 0) return last(lo[0], hi[0]);
  const int a = lo[level], b = hi[level];
  if (a == b) return Pattern::seq({chunks(level, a, a), between(lo, hi, level - 1)});
  std::vector<Pattern> alts{Pattern::seq({chunks(level, a, a), at_least(lo, level - 1)})};
  if (a + 1 <= b - 1)
    alts.push_back(Pattern::seq({chunks(level, a + 1, b - 1), any_shorter(level - 1)}));
  alts.push_back(Pattern::seq({chunks(level, b, b), at_most(hi, level - 1)}));
  return Pattern::alt(std::move(alts));
}

Pattern StringLengths::quoted(int64_t lo, int64_t hi) {
  lo = std::min(lo, kMaxStringLength);
  if (hi > kMaxStringLength) hi = kMaxStringLength;
  // Short bounds, and a lower bound alone that is short: one state per count
  // (about 47 for JSON's characters and escapes), inline below kLengthBase,
  // else in a rule of its own shared by the strings with the same bounds, so
  // that an object with many bounded strings does not hold all their states.
  const int64_t counted = hi >= 0 ? hi : lo;
  if (counted < kLengthBase) return json_string(static_cast<int>(lo), static_cast<int>(hi));
  if (counted <= kMaxInlineLength) {
    auto [it, fresh] =
        whole_rules_.emplace(std::pair{static_cast<int>(lo), static_cast<int>(hi)}, -1);
    if (fresh) {
      it->second = b_.declare_rule(fmt::format("a string of {} to {} characters", lo, hi));
      b_.define_rule(it->second, json_string(static_cast<int>(lo), static_cast<int>(hi)));
    }
    return Pattern::call(it->second);
  }
  if (hi < 0) hi = kMaxStringLength;  // a long lower bound alone: counted up to the largest
  int width = 1;
  for (int64_t n = hi; n >= kLengthBase; n /= kLengthBase) ++width;
  return Pattern::seq(
      {Pattern::byte('"'), between(digits_of(lo, width), digits_of(hi, width), width - 1)});
}

}  // namespace tandem::structured
