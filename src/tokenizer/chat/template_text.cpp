#include "tokenizer/chat/template_text.h"

#include "tokenizer/utf8.h"

namespace tandem::chat {
namespace {

// Python's str.strip(): Unicode whitespace plus the ASCII separators U+001C..U+001F.
bool is_py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

}  // namespace

bool contains(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }

std::string trim(std::string_view s) {
  size_t begin = 0, end = s.size();
  uint32_t cp;
  while (begin < end) {
    size_t n = utf8::decode(s, begin, cp);
    if (n == 0 || !is_py_space(cp)) break;
    begin += n;
  }
  while (end > begin) {  // step back over one character
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    size_t n = utf8::decode(s, start, cp);
    if (n == 0 || start + n != end || !is_py_space(cp)) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

std::optional<std::string> string_literal(const std::string& tmpl, size_t quote) {
  char q = tmpl[quote];
  std::string out;
  for (size_t i = quote + 1; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c == q) return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == tmpl.size()) break;
    switch (tmpl[i]) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      default:
        out += tmpl[i];  // \' \" \\ and anything else: the character itself
    }
  }
  return std::nullopt;
}

std::vector<std::string> output_literals(const std::string& tmpl) {
  std::vector<std::string> out;
  for (size_t at = tmpl.find("{{"); at != std::string::npos; at = tmpl.find("{{", at + 2)) {
    size_t i = at + 2;
    if (i < tmpl.size() && tmpl[i] == '-') ++i;
    while (i < tmpl.size() && (tmpl[i] == ' ' || tmpl[i] == '\n')) ++i;
    if (i < tmpl.size() && (tmpl[i] == '"' || tmpl[i] == '\''))
      if (auto lit = string_literal(tmpl, i)) out.push_back(std::move(*lit));
  }
  return out;
}

std::optional<std::string> text_after(const std::string& tmpl, std::string_view key) {
  size_t at = tmpl.find(key);
  if (at == std::string::npos) return std::nullopt;
  size_t begin = at + key.size(), end = begin;
  while (end < tmpl.size() && tmpl[end] != '\\' && tmpl[end] != '"' && tmpl[end] != '\'' &&
         tmpl[end] != '\n')
    ++end;
  return tmpl.substr(begin, end - begin);
}

}  // namespace tandem::chat
