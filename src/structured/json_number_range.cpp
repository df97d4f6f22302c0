#include "structured/json_number_range.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "structured/json_lexical.h"

namespace tandem::structured {
namespace {

// Numbers in fixed point: the value times 10^kMaxFractionDigits, exact for
// every number json_decimal_range may write (below 10^32 < 2^127).
using Fixed = __int128;
constexpr int kFrac = kMaxFractionDigits;

constexpr Fixed pow10(int n) {
  Fixed v = 1;
  while (n-- > 0) v *= 10;
  return v;
}
constexpr Fixed kScale = pow10(kFrac);
// The largest magnitude that can be written: kMaxIntegerDigits nines, a point, kFrac nines.
constexpr Fixed kLargest = pow10(kMaxIntegerDigits + kFrac) - 1;

Fixed floor_div(Fixed a, Fixed b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string digits(Fixed v) {  // v >= 0
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v > 0);
  return s;
}

// The decimal spelling of a fixed-point value, for strtod.
std::string text_of(Fixed v) {
  const bool neg = v < 0;
  const Fixed m = neg ? -v : v;
  std::string frac = digits(m % kScale);
  frac.insert(0, kFrac - frac.size(), '0');
  return (neg ? "-" : "") + digits(m / kScale) + "." + frac;
}

// A JSON number's text in fixed point, rounded down (toward -infinity), and
// whether that was exact; magnitudes beyond kLargest become kLargest + 1.
// Throws for text that is not a number.
struct Parsed {
  Fixed floor;
  bool exact;
};

Parsed parse(const std::string& text) {
  size_t i = 0;
  const bool neg = i < text.size() && text[i] == '-';
  if (neg) ++i;
  std::string mantissa;
  int exponent = 0;  // value = mantissa * 10^exponent
  bool point = false, any = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      mantissa += c;
      any = true;
      if (point) --exponent;
    } else if (c == '.' && !point) {
      point = true;
    } else {
      break;
    }
  }
  if (any && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    const char* start = text.c_str() + i + 1;
    char* end = nullptr;
    const long e = std::strtol(start, &end, 10);
    check(end != start && *end == '\0', "'{}' is not a number", text);
    exponent += static_cast<int>(std::clamp<long>(e, -1000, 1000));
    i = text.size();
  }
  check(any && i == text.size(), "'{}' is not a number", text);
  mantissa.erase(0, mantissa.find_first_not_of('0'));
  const int shift = exponent + kFrac;  // fixed = mantissa * 10^shift
  Fixed m = 0;
  bool exact = true;
  if (shift >= 0) {
    if (static_cast<int>(mantissa.size()) + shift > kMaxIntegerDigits + kFrac) {
      m = kLargest + 1;
    } else {
      for (char c : mantissa) m = m * 10 + (c - '0');
      m *= pow10(shift);
    }
  } else {
    const int keep = static_cast<int>(mantissa.size()) + shift;
    for (int k = 0; k < static_cast<int>(mantissa.size()); ++k) {
      if (k < keep) {
        m = m * 10 + (mantissa[k] - '0');
        if (m > kLargest) m = kLargest + 1;
      } else {
        exact &= mantissa[k] == '0';
      }
    }
  }
  // Truncation rounded the magnitude down: the floor of a positive value, one
  // unit above the floor of a negative one.
  return {neg ? -(m + (exact ? 0 : 1)) : m, exact};
}

double as_double(const std::string& text) { return std::strtod(text.c_str(), nullptr); }

// The least value that may be written above a lower bound: the bound rounded
// up when inclusive; when exclusive, the least value whose double exceeds the
// bound's, trying the finest step first.
Fixed lower_limit(const DecimalBound& b) {
  const Parsed p = parse(b.text);
  if (!b.exclusive) return p.exact ? p.floor : p.floor + 1;
  const double bound = as_double(b.text);
  for (int k = kFrac; k >= 0; --k) {
    const Fixed unit = pow10(kFrac - k);
    const Fixed candidate = (floor_div(p.floor, unit) + 1) * unit;
    if (candidate > kLargest || as_double(text_of(candidate)) > bound) return candidate;
  }
  fail("no number above the exclusive bound {} differs from it as a double", b.text);
}

// The greatest value that may be written below an upper bound (the mirror image).
Fixed upper_limit(const DecimalBound& b) {
  const Parsed p = parse(b.text);
  if (!b.exclusive) return p.floor;
  const double bound = as_double(b.text);
  const Fixed below = p.exact ? p.floor - 1 : p.floor;  // the greatest grid value under b
  for (int k = kFrac; k >= 0; --k) {
    const Fixed unit = pow10(kFrac - k);
    const Fixed candidate = floor_div(below, unit) * unit;
    if (candidate < -kLargest || as_double(text_of(candidate)) < bound) return candidate;
  }
  fail("no number below the exclusive bound {} differs from it as a double", b.text);
}

Pattern digit() { return Pattern::bytes(ByteSet::range('0', '9')); }

Pattern digit_range(char lo, char hi) {
  return Pattern::bytes(ByteSet::range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)));
}

bool all_of(const std::string& s, char c) { return s.find_first_not_of(c) == std::string::npos; }

// Digit strings s of 0..m digits (1..m when !allow_empty) that, padded with
// zeros to m digits, lie in [a, b] (a <= b, both m digits): fraction digits
// within bounds, trailing zeros optional. Linear in m: like same_length in
// json_lexical.cpp, a digit strictly between a's and b's frees the rest.
Pattern padded_range(const std::string& a, const std::string& b, bool allow_empty) {
  const int m = static_cast<int>(a.size());
  if (all_of(a, '0') && all_of(b, '9')) return Pattern::repeat(digit(), allow_empty ? 0 : 1, m);
  std::vector<Pattern> alts;
  if (allow_empty && all_of(a, '0')) alts.push_back(Pattern());
  const std::string ra = a.substr(1), rb = b.substr(1);
  auto rest = [&](const std::string& x, const std::string& y) {
    return m == 1 ? Pattern() : padded_range(x, y, true);
  };
  if (a[0] == b[0]) {
    alts.push_back(Pattern::seq({Pattern::byte(static_cast<uint8_t>(a[0])), rest(ra, rb)}));
    return Pattern::alt(std::move(alts));
  }
  const bool low_full = all_of(ra, '0'), high_full = all_of(rb, '9');
  const char first = low_full ? a[0] : static_cast<char>(a[0] + 1);
  const char last = high_full ? b[0] : static_cast<char>(b[0] - 1);
  if (!low_full)
    alts.push_back(Pattern::seq(
        {Pattern::byte(static_cast<uint8_t>(a[0])), rest(ra, std::string(ra.size(), '9'))}));
  if (first <= last)
    alts.push_back(Pattern::seq({digit_range(first, last), Pattern::repeat(digit(), 0, m - 1)}));
  if (!high_full)
    alts.push_back(Pattern::seq(
        {Pattern::byte(static_cast<uint8_t>(b[0])), rest(std::string(rb.size(), '0'), rb)}));
  return Pattern::alt(std::move(alts));
}

std::string fraction_digits(Fixed v) {  // v >= 0: its kFrac fraction digits
  std::string f = digits(v % kScale);
  f.insert(0, kFrac - f.size(), '0');
  return f;
}

// The optional fraction ".ddd" of a number whose fraction digits, padded, lie in [a, b].
Pattern fraction(const std::string& a, const std::string& b) {
  Pattern dotted = Pattern::seq({Pattern::byte('.'), padded_range(a, b, false)});
  return all_of(a, '0') ? Pattern::optional(dotted) : dotted;
}

// Non-negative numbers in [lo, hi] (fixed point, 0 <= lo <= hi).
Pattern non_negative(Fixed lo, Fixed hi) {
  const int64_t il = static_cast<int64_t>(lo / kScale), ih = static_cast<int64_t>(hi / kScale);
  const std::string fl = fraction_digits(lo), fh = fraction_digits(hi);
  const std::string zeros(kFrac, '0'), nines(kFrac, '9');
  auto whole = [](int64_t i) { return Pattern::literal(std::to_string(i)); };
  if (il == ih) return Pattern::seq({whole(il), fraction(fl, fh)});
  std::vector<Pattern> alts{Pattern::seq({whole(il), fraction(fl, nines)})};
  if (il + 1 <= ih - 1)
    alts.push_back(Pattern::seq({json_digits_range(il + 1, ih - 1), fraction(zeros, nines)}));
  alts.push_back(Pattern::seq({whole(ih), fraction(zeros, fh)}));
  return Pattern::alt(std::move(alts));
}

// The digits of integers y in [a, b] (1 <= a <= b) whose last digit is in `last`.
Pattern with_last_digit(int64_t a, int64_t b, const ByteSet& last) {
  auto last_in = [&](int lo, int hi) {
    ByteSet s;
    for (int d = lo; d <= hi; ++d)
      if (last.has(static_cast<uint8_t>('0' + d))) s.add(static_cast<uint8_t>('0' + d));
    return s;
  };
  auto prefix = [](int64_t t) { return t == 0 ? Pattern() : Pattern::literal(std::to_string(t)); };
  const int64_t ta = a / 10, tb = b / 10;
  const int da = static_cast<int>(a % 10), db = static_cast<int>(b % 10);
  std::vector<Pattern> alts;
  auto add = [&](Pattern head, const ByteSet& tail) {
    if (!tail.empty()) alts.push_back(Pattern::seq({std::move(head), Pattern::bytes(tail)}));
  };
  if (ta == tb) {
    add(prefix(ta), last_in(da, db));
  } else {
    add(prefix(ta), last_in(da, 9));
    if (ta + 1 <= tb - 1) add(json_digits_range(ta + 1, tb - 1), last_in(0, 9));
    add(prefix(tb), last_in(0, db));
  }
  return Pattern::alt(std::move(alts));
}

}  // namespace

Pattern json_decimal_range(const std::optional<DecimalBound>& lo_bound,
                           const std::optional<DecimalBound>& hi_bound) {
  const Fixed lo = std::max(lo_bound ? lower_limit(*lo_bound) : -kLargest, -kLargest);
  const Fixed hi = std::min(hi_bound ? upper_limit(*hi_bound) : kLargest, kLargest);
  check(lo <= hi, "no number lies within [{}, {}]", lo_bound ? lo_bound->text : "-inf",
        hi_bound ? hi_bound->text : "inf");
  std::vector<Pattern> alts;
  if (lo < 0)  // '-' and a magnitude in [max(0, -hi), -lo]; "-0" reads as 0, which then is in range
    alts.push_back(Pattern::seq({Pattern::byte('-'), non_negative(std::max<Fixed>(0, -hi), -lo)}));
  if (hi >= 0) alts.push_back(non_negative(std::max<Fixed>(0, lo), hi));
  return Pattern::alt(std::move(alts));
}

Pattern json_integer_multiples(std::optional<int64_t> lo_opt, std::optional<int64_t> hi_opt,
                               int64_t m) {
  check(m >= 1, "internal: multiples of {}", m);
  const int64_t lo = std::max(lo_opt.value_or(-kMaxIntegerMagnitude), -kMaxIntegerMagnitude);
  const int64_t hi = std::min(hi_opt.value_or(kMaxIntegerMagnitude), kMaxIntegerMagnitude);
  const int64_t qlo = static_cast<int64_t>(-floor_div(-Fixed{lo}, m));
  const int64_t qhi = static_cast<int64_t>(floor_div(Fixed{hi}, m));
  check(qlo <= qhi, "no multiple of {} lies in [{}, {}]", m, lo, hi);
  // m = c * 10^k: x = y * 10^k, y a multiple of c, which its last digit tells for c in {1, 2, 5}.
  int64_t c = m, k = 0;
  while (c % 10 == 0) {
    c /= 10;
    ++k;
  }
  if (c == 1 || c == 2 || c == 5) {
    ByteSet last;
    for (int d = 0; d <= 9; d += (c == 1 ? 1 : c)) last.add(static_cast<uint8_t>('0' + d));
    const int64_t unit = m / c;  // 10^k
    const int64_t ylo = static_cast<int64_t>(-floor_div(-Fixed{lo}, unit));
    const int64_t yhi = static_cast<int64_t>(floor_div(Fixed{hi}, unit));
    const Pattern zeros = Pattern::literal(std::string(static_cast<size_t>(k), '0'));
    std::vector<Pattern> alts;
    if (ylo <= 0 && yhi >= 0) alts.push_back(Pattern::literal("0"));
    if (yhi >= 1)
      alts.push_back(Pattern::seq({with_last_digit(std::max<int64_t>(1, ylo), yhi, last), zeros}));
    if (ylo <= -1)
      alts.push_back(Pattern::seq(
          {Pattern::byte('-'), with_last_digit(std::max<int64_t>(1, -yhi), -ylo, last), zeros}));
    return Pattern::alt(std::move(alts));
  }
  check(qhi - qlo < kMaxListedMultiples,
        "multiples of {} are generated over a range of at most {} of them ({} in [{}, {}])", m,
        kMaxListedMultiples, static_cast<int64_t>(qhi - qlo + 1), lo, hi);
  std::vector<Pattern> alts;
  for (int64_t q = qlo; q <= qhi; ++q) alts.push_back(Pattern::literal(std::to_string(q * m)));
  return Pattern::alt(std::move(alts));
}

}  // namespace tandem::structured
