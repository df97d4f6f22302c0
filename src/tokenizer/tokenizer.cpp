#include "tokenizer/tokenizer.h"

#include <algorithm>

namespace tandem {

std::optional<int> Tokenizer::find_piece(std::string_view piece) const {
  return lookup_piece(piece);
}

bool Tokenizer::is_eog(int id) const {
  return std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
}

std::string Tokenizer::decode_piece(int id, bool include_special, bool& at_text_start) const {
  std::string bytes = token_bytes(id, include_special);
  if (!strip_leading_space_) return bytes;
  if (is_special(id)) {
    at_text_start = true;  // the encoder puts a space before text after a special token
    return bytes;
  }
  if (at_text_start && !bytes.empty()) {
    if (bytes[0] == ' ') bytes.erase(0, 1);
    at_text_start = false;
  }
  return bytes;
}

std::string Tokenizer::decode(const std::vector<int>& ids, bool include_special) const {
  std::string out;
  bool at_text_start = true;
  for (int id : ids) out += decode_piece(id, include_special, at_text_start);
  return out;
}

}  // namespace tandem
