// Finding the text of special tokens in input text, so that it becomes those
// tokens instead of being split and merged. Matching is leftmost-longest (as
// Hugging Face tokenizers does): at each position the longest token text that
// starts there wins.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

struct SpecialTokenText {
  std::string text;
  int id = -1;
  // Control tokens are recognised only when asked (parse_special); user-defined
  // ones (text-like added tokens such as "<tool_call>") always.
  bool control = true;
  bool lstrip = false, rstrip = false;  // swallow whitespace to the left / right
};

// A span of the input: either a special token or raw text to tokenize.
struct TextFragment {
  int id = -1;  // -1 for raw text
  size_t begin = 0, end = 0;
};

class SpecialTokenMatcher {
 public:
  void add(SpecialTokenText t);  // empty texts are ignored
  bool empty() const { return count_ == 0; }
  std::vector<TextFragment> partition(std::string_view text, bool parse_special) const;

 private:
  // Candidates by first byte, longest first.
  std::array<std::vector<SpecialTokenText>, 256> by_first_byte_;
  size_t count_ = 0;
};

}  // namespace tandem
