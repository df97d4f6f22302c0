#include "engine/text_stream.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace tandem {

TextStream::TextStream(const Tokenizer& tok, std::vector<std::string> stop_strings,
                       std::vector<int> shown_special)
    : tok_(tok),
      decoder_(std::make_unique<StreamDecoder>(tok, false, /*at_text_start=*/false)),
      shown_special_(std::move(shown_special)),
      stops_(std::move(stop_strings)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

TextStream::~TextStream() = default;

bool TextStream::push(int id) {
  if (stopped_) return true;
  size_t old_size = text_.size();
  if (std::find(shown_special_.begin(), shown_special_.end(), id) != shown_special_.end())
    text_ += decoder_->flush() + tok_.token_bytes(id, true);
  else
    text_ += decoder_->push(id);
  size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    // Only matches that end in the new text can be new.
    size_t from = old_size >= s.size() ? old_size - s.size() + 1 : 0;
    size_t at = text_.find(s, from);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    text_.resize(cut);
    emitted_ = std::min(emitted_, cut);
    stopped_ = true;
  }
  return stopped_;
}

std::string TextStream::take_ready() {
  size_t ready = text_.size();
  if (!stopped_) {
    // Hold back the longest suffix that is a proper prefix of some stop string.
    for (const auto& s : stops_)
      for (size_t len = std::min(s.size() - 1, text_.size()); len > 0; --len)
        if (text_.compare(text_.size() - len, len, s, 0, len) == 0) {
          ready = std::min(ready, text_.size() - len);
          break;
        }
  }
  if (ready <= emitted_) return {};
  std::string out = text_.substr(emitted_, ready - emitted_);
  emitted_ = ready;
  return out;
}

std::string TextStream::finish() {
  if (!stopped_) text_ += decoder_->flush();
  std::string out = text_.substr(std::min(emitted_, text_.size()));
  emitted_ = text_.size();
  return out;
}

}  // namespace tandem
