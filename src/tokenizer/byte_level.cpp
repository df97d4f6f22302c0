#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace tandem::byte_level {
namespace {

struct Alphabet {
  std::array<std::string, 256> text;
  std::array<int16_t, 324> byte_of;  // code points 0..323 cover the alphabet

  Alphabet() {
    byte_of.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;  // non-printable bytes take U+0100, U+0101, ... in byte order
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : next++;
      utf8::append(text[b], cp);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

const std::string& byte_text(uint8_t b) { return alphabet().text[b]; }

int code_point_byte(uint32_t cp) {
  const auto& a = alphabet();
  return cp < a.byte_of.size() ? a.byte_of[cp] : -1;
}

std::string encode(std::string_view bytes) {
  const auto& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += a.text[static_cast<uint8_t>(c)];
  return out;
}

bool decode(std::string_view text, std::string& out) {
  bool all_mapped = true;
  uint32_t cp;
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8::decode(text, i, cp);
    if (n == 0) {  // not even UTF-8: keep the byte
      out += text[i++];
      all_mapped = false;
      continue;
    }
    int b = code_point_byte(cp);
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(text.substr(i, n));
      all_mapped = false;
    }
    i += n;
  }
  return all_mapped;
}

}  // namespace tandem::byte_level
