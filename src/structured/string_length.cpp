#include "structured/string_length.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "structured/code_point_set.h"

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
  if (level == 0) {
    // Runs of characters as calls too, shared: inline, each alternative of the
    // digit-range pattern would copy their states.
    if (max <= 1) return Pattern::repeat(json_any_string_char(), min, max);
    const std::pair<int, int> key{std::max(min, 1), max};
    auto [it, fresh] = run_rules_.emplace(key, -1);
    if (fresh) {
      it->second = b_.declare_rule(fmt::format("{} to {} characters", key.first, key.second));
      b_.define_rule(it->second, Pattern::repeat(json_any_string_char(), key.first, key.second));
    }
    const Pattern run = Pattern::call(it->second);
    return min == 0 ? Pattern::optional(run) : run;
  }
  if (static_cast<int>(chunk_rules_.size()) <= level) chunk_rules_.resize(level + 1, -1);
  if (chunk_rules_[level] < 0) {
    const Pattern body = chunks(level - 1, kLengthBase, kLengthBase);
    chunk_rules_[level] =
        b_.declare_rule("string chunk of " + std::to_string(1 << (5 * level)) + " characters");
    b_.define_rule(chunk_rules_[level], body);
  }
  return Pattern::repeat(Pattern::call(chunk_rules_[level]), min, max);
}

Pattern StringLengths::any_shorter(int level) {  // digits level..0 free
  std::vector<Pattern> seq;
  for (int k = level; k >= 0; --k) seq.push_back(chunks(k, 0, kLengthBase - 1));
  return Pattern::seq(std::move(seq));
}

// Lengths whose digits level..0 are at least (at most) `digits`' digits there.
Pattern StringLengths::at_least(const std::vector<int>& d, int level) {
  if (level < 0) return Pattern();
  std::vector<Pattern> alts{
      Pattern::seq({chunks(level, d[level], d[level]), at_least(d, level - 1)})};
  if (d[level] + 1 <= kLengthBase - 1)
    alts.push_back(Pattern::seq({chunks(level, d[level] + 1, kLengthBase - 1),
                                 level > 0 ? any_shorter(level - 1) : Pattern()}));
  return Pattern::alt(std::move(alts));
}

Pattern StringLengths::at_most(const std::vector<int>& d, int level) {
  if (level < 0) return Pattern();
  std::vector<Pattern> alts{
      Pattern::seq({chunks(level, d[level], d[level]), at_most(d, level - 1)})};
  if (d[level] >= 1)
    alts.push_back(Pattern::seq(
        {chunks(level, 0, d[level] - 1), level > 0 ? any_shorter(level - 1) : Pattern()}));
  return Pattern::alt(std::move(alts));
}

Pattern StringLengths::between(const std::vector<int>& lo, const std::vector<int>& hi, int level) {
  if (level < 0) return Pattern();
  const int a = lo[level], b = hi[level];
  if (a == b) return Pattern::seq({chunks(level, a, a), between(lo, hi, level - 1)});
  std::vector<Pattern> alts{Pattern::seq({chunks(level, a, a), at_least(lo, level - 1)})};
  if (a + 1 <= b - 1)
    alts.push_back(Pattern::seq(
        {chunks(level, a + 1, b - 1), level > 0 ? any_shorter(level - 1) : Pattern()}));
  alts.push_back(Pattern::seq({chunks(level, b, b), at_most(hi, level - 1)}));
  return Pattern::alt(std::move(alts));
}

Pattern StringLengths::content(int64_t lo, int64_t hi) {
  lo = std::min(lo, kMaxStringLength);
  if (hi > kMaxStringLength) hi = kMaxStringLength;
  const Pattern any_char = json_any_string_char();
  // Short bounds: one state per count is cheaper than calls.
  if (hi >= 0 && hi < kLengthBase)
    return Pattern::repeat(any_char, static_cast<int>(lo), static_cast<int>(hi));
  if (hi < 0) {
    if (lo < kLengthBase) return Pattern::repeat(any_char, static_cast<int>(lo), -1);
    // At least lo: exactly lo counted, then any more.
    return Pattern::seq({content(lo, lo), Pattern::star(any_char)});
  }
  int width = 1;
  for (int64_t n = hi; n >= kLengthBase; n /= kLengthBase) ++width;
  return between(digits_of(lo, width), digits_of(hi, width), width - 1);
}

}  // namespace tandem::structured
