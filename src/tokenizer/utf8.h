// UTF-8 helpers for the tokenizers: strict decoding (no overlongs, no surrogates,
// nothing above U+10FFFF), encoding, and the checks incremental decoding needs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::utf8 {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Decodes the character starting at s[pos] into cp and returns its length in
// bytes (1-4), or 0 when the bytes there are not a complete, valid character.
size_t decode(std::string_view s, size_t pos, uint32_t& cp);

// When the bytes from s[pos] to the end of s are the valid beginning of a
// character that the end of s cuts short, returns how many there are; else 0.
size_t truncated_length(std::string_view s, size_t pos);

void append(std::string& out, uint32_t cp);
bool is_valid(std::string_view s);

// s with every byte that does not belong to a valid character replaced by
// U+FFFD (a truncated character counts as one).
std::string sanitize(std::string_view s);

}  // namespace tandem::utf8
