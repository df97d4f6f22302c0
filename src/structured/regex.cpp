#include "structured/regex.h"

#include "core/error.h"
#include "structured/code_point_set.h"
#include "tokenizer/utf8.h"

namespace tandem::structured {
namespace {

// Deeper nesting is refused: parsing and compiling recurse once per level.
constexpr int kMaxGroupDepth = 32;

CodePointSet digit_set() { return CodePointSet::range('0', '9'); }

CodePointSet word_set() {
  CodePointSet s = CodePointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}

CodePointSet space_set() {  // ECMA-262 WhiteSpace and LineTerminator
  CodePointSet s = CodePointSet::range('\t', '\r');
  for (uint32_t cp : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu})
    s.add(cp, cp);
  s.add(0x2000, 0x200A);
  return s;
}

CodePointSet dot_set() {  // everything but line terminators
  CodePointSet s = CodePointSet::all();
  for (uint32_t cp : {0x0Au, 0x0Du, 0x2028u, 0x2029u}) s = s.minus(CodePointSet::of(cp));
  return s;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view re) : re_(re) {}

  Pattern parse() {
    // Top-level alternatives, each anchored on its own.
    std::vector<Pattern> alts;
    do {
      alts.push_back(top_alternative());
    } while (eat('|'));
    if (pos_ < re_.size()) error(re_[pos_] == ')' ? "an unmatched ')'" : "an unexpected character");
    return Pattern::alt(std::move(alts));
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail("pattern '{}': {} at offset {} is not supported", re_, what, pos_);
  }
  bool at_end() const { return pos_ >= re_.size(); }
  char peek() const { return at_end() ? '\0' : re_[pos_]; }
  bool eat(char c) {
    if (peek() != c || at_end()) return false;
    ++pos_;
    return true;
  }

  Pattern any_text() const { return Pattern::star(json_string_char(CodePointSet::all())); }

  Pattern top_alternative() {
    const bool anchored_start = eat('^');
    std::vector<Pattern> items;
    if (!anchored_start) items.push_back(any_text());
    items.push_back(sequence());
    if (eat('$')) {
      if (!at_end() && peek() != '|') error("'$' before the end");
    } else {
      items.push_back(any_text());
    }
    return Pattern::seq(std::move(items));
  }

  Pattern alternation() {
    std::vector<Pattern> alts;
    do {
      alts.push_back(sequence());
    } while (eat('|'));
    return Pattern::alt(std::move(alts));
  }

  Pattern sequence() {
    std::vector<Pattern> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        // Only valid at the end of a top-level alternative: the caller checks.
        if (depth_ == 0) break;
        error("'$' inside a group");
      }
      if (peek() == '^') error("'^' after the start");
      items.push_back(quantified(atom()));
    }
    return Pattern::seq(std::move(items));
  }

  int number() {
    size_t start = pos_;
    long v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (re_[pos_++] - '0');
      if (v > 1000000) error("a repetition count this large");
    }
    if (pos_ == start) return -1;
    return static_cast<int>(v);
  }

  // One quantifier per atom (ECMA-262 refuses "a**" and "a{2}{3}"), so that
  // patterns stay as shallow as the expression's groups.
  Pattern quantified(Pattern p) {
    int min, max;
    if (eat('*')) {
      min = 0, max = -1;
    } else if (eat('+')) {
      min = 1, max = -1;
    } else if (eat('?')) {
      min = 0, max = 1;
    } else if (peek() == '{') {
      const size_t save = pos_++;
      min = number();
      if (min < 0) {  // a literal '{' (ECMA-262 Annex B)
        pos_ = save;
        return p;
      }
      max = min;
      if (eat(',')) max = number();  // -1 when absent: unbounded
      if (!eat('}')) error("a malformed {n,m} quantifier");
      if (max != -1 && max < min) error("a {n,m} quantifier with m < n");
      if (min > kMaxRegexRepeat || max > kMaxRegexRepeat)
        error(fmt::format("a repetition count above {}", kMaxRegexRepeat));
    } else {
      return p;
    }
    eat('?');  // lazy: the same language
    if (peek() == '*' || peek() == '+' || peek() == '?' ||
        (peek() == '{' && pos_ + 1 < re_.size() && re_[pos_ + 1] >= '0' && re_[pos_ + 1] <= '9'))
      error("a quantifier with nothing to repeat");
    return Pattern::repeat(std::move(p), min, max);
  }

  Pattern atom() {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (eat('?')) {
        if (eat(':')) {
        } else if (peek() == '<' && pos_ + 1 < re_.size() && re_[pos_ + 1] != '=' &&
                   re_[pos_ + 1] != '!') {
          while (!at_end() && peek() != '>') ++pos_;
          if (!eat('>')) error("an unterminated group name");
        } else {
          error("lookaround or a group flag");
        }
      }
      if (++depth_ > kMaxGroupDepth)
        error(fmt::format("groups nested deeper than {}", kMaxGroupDepth));
      Pattern inner = alternation();
      --depth_;
      if (!eat(')')) error("an unterminated group");
      return inner;
    }
    if (c == '[') return json_string_char(char_class());
    if (c == '.') {
      ++pos_;
      return json_string_char(dot_set());
    }
    if (c == '*' || c == '+' || c == '?') error("a quantifier with nothing to repeat");
    if (c == '\\') {
      CodePointSet set;
      if (escape(set, false)) return json_string_char(set);
      error("this escape");
    }
    return json_string_char(CodePointSet::of(literal_char()));
  }

  uint32_t literal_char() {
    uint32_t cp;
    const size_t n = utf8::decode(re_, pos_, cp);
    if (n == 0) error("invalid UTF-8");
    pos_ += n;
    return cp;
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) error("a malformed hexadecimal escape");
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // After '\': fills `set` with what the escape stands for. Returns false for
  // an escape that is no character (back-references, \b, \p{...}).
  bool escape(CodePointSet& set, bool in_class) {
    ++pos_;  // the backslash
    if (at_end()) error("a trailing backslash");
    const char c = re_[pos_++];
    switch (c) {
      case 'd':
        set = digit_set();
        return true;
      case 'D':
        set = digit_set().complement();
        return true;
      case 'w':
        set = word_set();
        return true;
      case 'W':
        set = word_set().complement();
        return true;
      case 's':
        set = space_set();
        return true;
      case 'S':
        set = space_set().complement();
        return true;
      case 't':
        set = CodePointSet::of('\t');
        return true;
      case 'n':
        set = CodePointSet::of('\n');
        return true;
      case 'r':
        set = CodePointSet::of('\r');
        return true;
      case 'f':
        set = CodePointSet::of('\f');
        return true;
      case 'v':
        set = CodePointSet::of('\v');
        return true;
      case '0':
        set = CodePointSet::of(0);
        return true;
      case 'x':
        set = CodePointSet::of(hex(2));
        return true;
      case 'u': {
        uint32_t cp;
        if (eat('{')) {
          cp = 0;
          int n = 0;
          while (!at_end() && peek() != '}' && n < 6) cp = cp * 16 + hex(1), ++n;
          if (!eat('}') || n == 0 || cp > kMaxCodePoint) error("a malformed \\u{...} escape");
        } else {
          cp = hex(4);
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) error("a surrogate code point escape");
        set = CodePointSet::of(cp);
        return true;
      }
      case 'b':
        if (in_class) {
          set = CodePointSet::of('\b');
          return true;
        }
        --pos_;
        error("a word boundary \\b");
      case 'B':
        --pos_;
        error("a word boundary \\B");
      case 'p':
      case 'P':
        --pos_;
        error("a Unicode property escape");
      case 'c':
        --pos_;
        error("a control escape \\c");
      case 'k':
        --pos_;
        error("a named back-reference");
      default:
        break;
    }
    if (c >= '1' && c <= '9') {
      pos_ -= 1;
      error("a back-reference");
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      pos_ -= 1;
      error(fmt::format("the escape \\{}", c));
    }
    --pos_;
    set = CodePointSet::of(literal_char());  // escaped punctuation stands for itself
    return true;
  }

  // One member of a class: a character, or (returned false) a set escape.
  bool class_atom(uint32_t& cp, CodePointSet& set) {
    if (peek() == '\\') {
      escape(set, true);
      if (set.ranges().size() == 1 && set.ranges()[0].first == set.ranges()[0].second) {
        cp = set.ranges()[0].first;
        return true;
      }
      return false;
    }
    cp = literal_char();
    return true;
  }

  CodePointSet char_class() {
    ++pos_;  // '['
    const bool negated = eat('^');
    CodePointSet set;
    while (!at_end() && peek() != ']') {
      uint32_t lo;
      CodePointSet esc;
      if (!class_atom(lo, esc)) {
        set.add(esc);
        continue;
      }
      if (peek() == '-' && pos_ + 1 < re_.size() && re_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi;
        CodePointSet esc2;
        if (!class_atom(hi, esc2)) error("a class escape as a range end");
        if (hi < lo) error("a character range out of order");
        set.add(lo, hi);
      } else {
        set.add(lo, lo);
      }
    }
    if (!eat(']')) error("an unterminated character class");
    return negated ? set.complement() : set;
  }

  std::string_view re_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Pattern compile_json_string_regex(std::string_view regex) { return RegexParser(regex).parse(); }

}  // namespace tandem::structured
