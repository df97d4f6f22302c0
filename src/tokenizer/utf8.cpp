#include "tokenizer/utf8.h"

namespace tandem::utf8 {
namespace {

// The expected length of a character from its first byte (0: not a valid
// first byte), and the allowed range of its second byte, which is where
// overlong forms, surrogates and values above U+10FFFF are excluded.
struct Lead {
  size_t len;
  uint8_t lo, hi;
};

Lead lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes from s[pos] (at most the character's length) are a valid
// beginning of the character that starts there.
size_t valid_prefix(std::string_view s, size_t pos, const Lead& lead) {
  size_t n = 1;
  for (; n < lead.len && pos + n < s.size(); ++n) {
    auto b = static_cast<uint8_t>(s[pos + n]);
    bool ok = n == 1 ? (b >= lead.lo && b <= lead.hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
  }
  return n;
}

}  // namespace

size_t decode(std::string_view s, size_t pos, uint32_t& cp) {
  if (pos >= s.size()) return 0;
  auto b0 = static_cast<uint8_t>(s[pos]);
  Lead lead = lead_info(b0);
  if (lead.len == 0) return 0;
  if (lead.len == 1) {
    cp = b0;
    return 1;
  }
  if (valid_prefix(s, pos, lead) != lead.len) return 0;
  static constexpr uint8_t kLeadMask[5] = {0, 0, 0x1F, 0x0F, 0x07};
  uint32_t v = b0 & kLeadMask[lead.len];
  for (size_t i = 1; i < lead.len; ++i) v = (v << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3F);
  cp = v;
  return lead.len;
}

size_t truncated_length(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  Lead lead = lead_info(static_cast<uint8_t>(s[pos]));
  if (lead.len < 2) return 0;
  size_t avail = s.size() - pos;
  if (avail >= lead.len) return 0;
  return valid_prefix(s, pos, lead) == avail ? avail : 0;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_valid(std::string_view s) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = decode(s, i, cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = decode(s, i, cp);
    if (n != 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    append(out, kReplacementChar);
    // A valid beginning cut short by an invalid byte is one bad sequence.
    Lead lead = lead_info(static_cast<uint8_t>(s[i]));
    i += lead.len >= 2 ? valid_prefix(s, i, lead) : 1;
  }
  return out;
}

}  // namespace tandem::utf8
