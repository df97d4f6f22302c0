#include "structured/regex_strings.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "structured/grammar.h"
#include "structured/json_lexical.h"
#include "structured/regex.h"

namespace tandem::structured {
namespace {

// Whether `content` compiles to an automaton of at most kMaxRegexStates states.
bool small_automaton(const Pattern& content) {
  GrammarBuilder gb;
  const int r = gb.declare_rule("pattern");
  gb.define_rule(r, json_quoted(content));
  try {
    gb.build(r, kMaxRegexStates);
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Whether a regex uses '^' only inside character classes (then "^(?:...)"
// anchors it without changing what else it means).
bool caret_free(const std::string& regex) {
  bool in_class = false;
  for (size_t i = 0; i < regex.size(); ++i) {
    if (regex[i] == '\\') {
      ++i;
    } else if (regex[i] == '[') {
      in_class = true;
    } else if (regex[i] == ']') {
      in_class = false;
    } else if (regex[i] == '^' && !in_class) {
      return false;
    }
  }
  return true;
}

}  // namespace

Pattern string_regex(const std::string& regex) {
  Pattern content = compile_json_string_regex(regex);
  if (!caret_free(regex) || small_automaton(content)) return content;
  return compile_json_string_regex("^(?:" + regex + ")");
}

RegexLengths regex_lengths(const Pattern& p) {
  switch (p.kind()) {
    case Pattern::Kind::Empty:
      return {0, 0, true};
    case Pattern::Kind::Bytes: {
      // A UTF-8 continuation byte adds no character to the one its lead began.
      bool continuation = true, ascii = true;
      for (int b = 0; b < 256; ++b)
        if (p.byte_set().has(static_cast<uint8_t>(b))) {
          continuation &= b >= 0x80 && b <= 0xBF;
          ascii &= b >= 0x20 && b < 0x7F && b != '"' && b != '\\';
        }
      return continuation ? RegexLengths{0, 0, false} : RegexLengths{1, 1, ascii};
    }
    case Pattern::Kind::Seq:
    case Pattern::Kind::Members: {
      // An escape ('\\' and what follows it in its sequence) is one character.
      const auto& items = p.items();
      if (p.kind() == Pattern::Kind::Seq && !items.empty() &&
          items[0].kind() == Pattern::Kind::Bytes && items[0].byte_set() == ByteSet::of('\\'))
        return {1, 1, false};
      RegexLengths out{0, 0, true};
      for (const auto& i : p.items()) {
        const RegexLengths l = regex_lengths(i);
        out.min += l.min;
        out.max = out.max < 0 || l.max < 0 ? -1 : out.max + l.max;
        out.ascii &= l.ascii;
      }
      return out;
    }
    case Pattern::Kind::Alt: {
      RegexLengths out{INT64_MAX, 0, true};
      for (const auto& i : p.items()) {
        const RegexLengths l = regex_lengths(i);
        out.min = std::min(out.min, l.min);
        out.max = out.max < 0 || l.max < 0 ? -1 : std::max(out.max, l.max);
        out.ascii &= l.ascii;
      }
      return out;
    }
    case Pattern::Kind::Repeat: {
      const RegexLengths l = regex_lengths(p.items()[0]);
      return {l.min * p.min(), p.max() < 0 || l.max < 0 ? -1 : l.max * p.max(), l.ascii};
    }
    case Pattern::Kind::Call:
      break;
  }
  return {0, -1, false};  // a call: unknown
}

namespace {

// `p` with every unbounded repetition allowed at most k more than its minimum.
Pattern with_repeats_bounded(const Pattern& p, int k) {
  switch (p.kind()) {
    case Pattern::Kind::Seq:
    case Pattern::Kind::Alt: {
      std::vector<Pattern> items;
      for (const auto& i : p.items()) items.push_back(with_repeats_bounded(i, k));
      return p.kind() == Pattern::Kind::Seq ? Pattern::seq(std::move(items))
                                            : Pattern::alt(std::move(items));
    }
    case Pattern::Kind::Repeat:
      return Pattern::repeat(with_repeats_bounded(p.items()[0], k), p.min(),
                             p.max() < 0 ? p.min() + k : p.max());
    default:
      return p;  // bytes, empty (regexes hold no calls or members)
  }
}

}  // namespace

std::optional<Pattern> bound_length(const Pattern& content, int64_t max_chars) {
  // Bytes bound characters from above, so the byte length is checked.
  auto fits = [&](int k) {
    const RegexLengths l = regex_lengths(with_repeats_bounded(content, k));
    return l.max >= 0 && l.max <= max_chars;
  };
  if (!fits(0)) return std::nullopt;
  int lo = 0, hi = static_cast<int>(std::min<int64_t>(max_chars, kMaxRegexRepeat));
  while (lo < hi) {  // the largest k that fits
    const int mid = (lo + hi + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return with_repeats_bounded(content, lo);
}

}  // namespace tandem::structured
