// Turns accepted tokens into output text: incremental UTF-8-safe detokenization,
// stop strings, and holding back the tail that could still become a stop string
// so a client never sees text that a stop later removes.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace tandem {

class Tokenizer;
class StreamDecoder;

class TextStream {
 public:
  // shown_special: special tokens whose text is written (others write none).
  TextStream(const Tokenizer& tok, std::vector<std::string> stop_strings,
             std::vector<int> shown_special = {});
  ~TextStream();

  // Append one token's text. Returns true when a stop string is now complete:
  // the text is cut where the stop string begins and nothing more should be pushed.
  bool push(int id);
  // Text that is final and not yet handed out.
  std::string take_ready();
  // End of generation: flush any held-back text (not after a stop).
  std::string finish();
  const std::string& text() const { return text_; }

 private:
  const Tokenizer& tok_;
  std::unique_ptr<StreamDecoder> decoder_;
  std::vector<int> shown_special_;
  std::vector<std::string> stops_;
  std::string text_;
  size_t emitted_ = 0;
  bool stopped_ = false;
};

}  // namespace tandem
