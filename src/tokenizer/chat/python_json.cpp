#include "tokenizer/chat/python_json.h"

#include <fmt/format.h>

#include <cmath>

namespace tandem::chat {
namespace {

using json = nlohmann::ordered_json;

// Python escapes the two JSON metacharacters, the five short control escapes and
// the other control characters as \u00XX; everything else goes in as it is.
void write_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20)
          out += fmt::format("\\u{:04x}", c);
        else
          out += static_cast<char>(c);
    }
  }
  out += '"';
}

// Python's float repr: the shortest text that reads back as the same double,
// with ".0" on integral values and an exponent from 1e16 (written "1e+16").
std::string float_text(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  std::string s = json(x).dump();  // shortest round-trip digits
  const size_t e = s.find_first_of("eE");
  if (e == std::string::npos) return s;
  // nlohmann writes e.g. "1e+16" / "1e-07" / "1.5e+300": Python does the same,
  // except that it always writes at least two exponent digits.
  size_t digits = e + 1;
  char sign = '+';
  if (digits < s.size() && (s[digits] == '-' || s[digits] == '+')) sign = s[digits++];
  while (digits + 1 < s.size() && s[digits] == '0') ++digits;
  const std::string_view exp = std::string_view(s).substr(digits);
  return fmt::format("{}e{}{}{}", std::string_view(s).substr(0, e), sign, exp.size() < 2 ? "0" : "",
                     exp);
}

void write(const json& v, int indent, int level, std::string& out) {
  const bool pretty = indent >= 0;
  auto newline = [&](int lvl) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * lvl, ' ');
  };
  switch (v.type()) {
    case json::value_t::object: {
      if (v.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.items()) {
        if (!first) out += pretty ? "," : ", ";
        first = false;
        if (pretty) newline(level + 1);
        write_string(key, out);
        out += ": ";
        write(value, indent, level + 1, out);
      }
      if (pretty) newline(level);
      out += '}';
      return;
    }
    case json::value_t::array: {
      if (v.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += pretty ? "," : ", ";
        first = false;
        if (pretty) newline(level + 1);
        write(item, indent, level + 1, out);
      }
      if (pretty) newline(level);
      out += ']';
      return;
    }
    case json::value_t::string:
      write_string(v.get_ref<const std::string&>(), out);
      return;
    case json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case json::value_t::number_float:
      out += float_text(v.get<double>());
      return;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      out += v.dump();
      return;
    default:
      out += "null";
  }
}

}  // namespace

std::string python_json_dumps(const json& v, int indent) {
  std::string out;
  write(v, indent, 0, out);
  return out;
}

}  // namespace tandem::chat
