#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tandem {

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool include_special, bool at_text_start)
    : tok_(tok), include_special_(include_special), first_(at_text_start) {}

std::string StreamDecoder::push(int id) {
  pending_ += tok_.decode_piece(id, include_special_, first_);
  // Hold back a character that the end of the bytes so far cuts short.
  size_t held = 0;
  for (size_t back = 1; back <= 3 && back <= pending_.size(); ++back) {
    if (utf8::truncated_length(pending_, pending_.size() - back) == back) {
      held = back;
      break;
    }
  }
  size_t ready = pending_.size() - held;
  std::string out = utf8::sanitize(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace tandem
