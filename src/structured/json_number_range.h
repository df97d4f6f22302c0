// Byte patterns of JSON numbers within bounds, and of multiples: the numeric
// keywords of JSON Schema (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, multipleOf) beyond the integer ranges of json_lexical.h.
//
// Validators compare numbers as IEEE doubles (Python's jsonschema, most C++
// and JavaScript ones), so every number written here must lie within its
// bounds both as a decimal and as the double nearest to it. Inclusive bounds
// are safe as decimals: rounding to the nearest double is monotonic. An
// exclusive bound is first moved inward to a decimal whose double differs from
// the bound's (x > 5 becomes x >= 5.000000000000001, not 5.0000000000000001,
// which reads as 5.0).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "structured/pattern.h"

namespace tandem::structured {

// A bound on a number: its JSON spelling ("0.5", "1e-05", "-3") and whether
// the bound itself is excluded.
struct DecimalBound {
  std::string text;
  bool exclusive = false;
};

// Numbers within the bounds (either absent: unbounded on that side), spelled
// without an exponent, with at most kMaxIntegerDigits digits before the point
// and kMaxFractionDigits after it. Throws tandem::Error when a bound is not a
// number or no such number lies within the bounds.
Pattern json_decimal_range(const std::optional<DecimalBound>& lo,
                           const std::optional<DecimalBound>& hi);

// The largest count of multiples that is spelled as a list of literals when m
// is not 1, 2 or 5 times a power of ten.
inline constexpr int64_t kMaxListedMultiples = 1024;

// The integers in [lo, hi] (absent: +-kMaxIntegerMagnitude) that are multiples
// of m >= 1. Exact for m = c * 10^k with c in {1, 2, 5} over any range (the
// last digits decide); for other m, when the range holds at most
// kMaxListedMultiples multiples (they are listed). Throws tandem::Error
// otherwise, or when no multiple lies in the range.
Pattern json_integer_multiples(std::optional<int64_t> lo, std::optional<int64_t> hi, int64_t m);

}  // namespace tandem::structured
