#include "structured/regex_strings.h"

#include <algorithm>

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
      bool ascii = true;
      for (int b = 0; b < 256; ++b)
        if (p.byte_set().has(static_cast<uint8_t>(b)))
          ascii &= b >= 0x20 && b < 0x7F && b != '"' && b != '\\';
      return {1, 1, ascii};
    }
    case Pattern::Kind::Seq:
    case Pattern::Kind::Members: {
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

}  // namespace tandem::structured
