// GPT-2's byte-level alphabet: every byte value is shown as a printable code
// point (printable Latin-1 bytes as themselves, the other 68 as U+0100 upward),
// so BPE vocabularies of byte sequences can be stored as text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::byte_level {

// The UTF-8 text of the code point that stands for byte b.
const std::string& byte_text(uint8_t b);
// The byte a code point stands for, or -1 when it is not one of the 256.
int code_point_byte(uint32_t cp);
// Every byte of `bytes` as its code point.
std::string encode(std::string_view bytes);
// The reverse of encode(). Returns false when `text` holds anything but
// code points of the alphabet (out then has those characters copied as they are).
bool decode(std::string_view text, std::string& out);

}  // namespace tandem::byte_level
