#include "structured/code_point_set.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace tandem::structured {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

// Byte ranges of UTF-8 encodings of [lo, hi], a range of code points of one
// encoded length and no surrogates, split so that each sequence is a product of
// byte ranges.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<Pattern>& out) {
  std::string a, b;
  utf8::append(a, lo);
  utf8::append(b, hi);
  const int n = static_cast<int>(a.size());
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::vector<Pattern> seq;
  for (int k = 0; k < n; ++k)
    seq.push_back(
        Pattern::bytes(ByteSet::range(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]))));
  out.push_back(Pattern::seq(std::move(seq)));
}

void utf8_range(uint32_t lo, uint32_t hi, std::vector<Pattern>& out) {
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (uint32_t end : kLengthEnds) {
    if (lo > hi) return;
    if (lo > end) continue;
    const uint32_t top = std::min(hi, end);
    utf8_sequences(lo, top, out);
    lo = top + 1;
  }
}

char hex_digit(int v) { return "0123456789abcdef"[v]; }

// The escape a JSON serializer writes for a character that must be escaped.
std::string json_escape(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  return std::string("\\u00") + hex_digit(static_cast<int>(cp >> 4)) +
         hex_digit(static_cast<int>(cp & 15));
}

ByteSet hex_set(const char* ranges) {  // "09af" -> [0-9a-f] and upper case letters too
  ByteSet s;
  for (const char* p = ranges; p[0] && p[1]; p += 2) {
    s.add_range(static_cast<uint8_t>(p[0]), static_cast<uint8_t>(p[1]));
    if (p[0] >= 'a')
      s.add_range(static_cast<uint8_t>(p[0] - 'a' + 'A'), static_cast<uint8_t>(p[1] - 'a' + 'A'));
  }
  return s;
}

}  // namespace

CodePointSet CodePointSet::range(uint32_t lo, uint32_t hi) {
  CodePointSet s;
  s.add(lo, hi);
  return s;
}

CodePointSet CodePointSet::all() {
  CodePointSet s;
  s.add(0, kSurrogateLo - 1);
  s.add(kSurrogateHi + 1, kMaxCodePoint);
  return s;
}

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, std::min(hi, kMaxCodePoint));
  normalize();
}

void CodePointSet::add(const CodePointSet& o) {
  ranges_.insert(ranges_.end(), o.ranges_.begin(), o.ranges_.end());
  normalize();
}

void CodePointSet::normalize() {
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (auto r : ranges_) {
    if (!out.empty() && r.first <= out.back().second + 1)
      out.back().second = std::max(out.back().second, r.second);
    else
      out.push_back(r);
  }
  ranges_ = std::move(out);
}

CodePointSet CodePointSet::complement() const { return all().minus(*this); }

CodePointSet CodePointSet::minus(const CodePointSet& o) const {
  CodePointSet out;
  for (auto [lo, hi] : ranges_) {
    uint32_t cur = lo;
    for (auto [olo, ohi] : o.ranges_) {
      if (ohi < cur || olo > hi) continue;
      if (olo > cur) out.ranges_.emplace_back(cur, olo - 1);
      if (ohi >= hi) {
        cur = hi + 1;
        break;
      }
      cur = ohi + 1;
    }
    if (cur <= hi) out.ranges_.emplace_back(cur, hi);
  }
  out.normalize();
  return out;
}

bool CodePointSet::contains(uint32_t cp) const {
  for (auto [lo, hi] : ranges_)
    if (cp >= lo && cp <= hi) return true;
  return false;
}

Pattern utf8_char(const CodePointSet& set) {
  const CodePointSet valid = set.minus(CodePointSet::range(kSurrogateLo, kSurrogateHi));
  std::vector<Pattern> alts;
  for (auto [lo, hi] : valid.ranges()) utf8_range(lo, hi, alts);
  // Merge the single-byte alternatives into one byte set.
  ByteSet ascii;
  std::vector<Pattern> rest;
  for (auto& p : alts) {
    if (p.kind() == Pattern::Kind::Bytes)
      ascii |= p.byte_set();
    else
      rest.push_back(std::move(p));
  }
  if (!ascii.empty()) rest.insert(rest.begin(), Pattern::bytes(ascii));
  if (rest.empty()) return Pattern::bytes(ByteSet{});  // matches nothing
  return Pattern::alt(std::move(rest));
}

Pattern json_string_char(const CodePointSet& set) {
  CodePointSet must_escape = CodePointSet::range(0, 0x1F);
  must_escape.add('"', '"');
  must_escape.add('\\', '\\');
  std::vector<Pattern> alts;
  const CodePointSet plain = set.minus(must_escape);
  if (!plain.empty()) alts.push_back(utf8_char(plain));
  for (auto [lo, hi] : set.ranges())
    for (uint32_t cp = lo; cp <= hi && cp <= 0x5C; ++cp)
      if (must_escape.contains(cp)) alts.push_back(Pattern::literal(json_escape(cp)));
  if (alts.empty()) return Pattern::bytes(ByteSet{});  // matches nothing
  return Pattern::alt(std::move(alts));
}

Pattern json_any_string_char() {
  CodePointSet unescaped = CodePointSet::all().minus(CodePointSet::range(0, 0x1F));
  unescaped = unescaped.minus(CodePointSet::of('"')).minus(CodePointSet::of('\\'));
  const Pattern hex = Pattern::bytes(hex_set("09af"));
  // \uXXXX that is not a surrogate: first digit not d, or d followed by 0-7.
  const Pattern non_surrogate = Pattern::alt({
      Pattern::seq({Pattern::bytes(hex_set("09acef")), hex, hex, hex}),
      Pattern::seq(
          {Pattern::bytes(hex_set("dd")), Pattern::bytes(ByteSet::range('0', '7')), hex, hex}),
  });
  const Pattern pair = Pattern::seq({
      Pattern::bytes(hex_set("dd")), Pattern::bytes(hex_set("89ab")), hex, hex,  // high surrogate
      Pattern::literal("\\u"), Pattern::bytes(hex_set("dd")), Pattern::bytes(hex_set("cf")), hex,
      hex,  // low surrogate
  });
  ByteSet simple_escapes;
  for (char c : std::string_view("\"\\/bfnrt")) simple_escapes.add(static_cast<uint8_t>(c));
  const Pattern escape = Pattern::seq({
      Pattern::byte('\\'),
      Pattern::alt({Pattern::bytes(simple_escapes),
                    Pattern::seq({Pattern::byte('u'), Pattern::alt({non_surrogate, pair})})}),
  });
  return Pattern::alt({utf8_char(unescaped), escape});
}

}  // namespace tandem::structured
