// Pre-tokenization by regular expressions (PCRE2 in UTF + UCP mode, so \p{L},
// \p{N}, \s and lookaheads follow Unicode). Each pattern in turn splits every
// piece into its matches and the gaps between them, both kept ("Isolated" in
// Hugging Face terms), which is how llama.cpp and tokenizers chain regexes.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class RegexSplitter {
 public:
  // Throws tandem::Error naming `source` and the pattern when one does not compile.
  RegexSplitter(const std::vector<std::string>& patterns, const std::string& source);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Splits text into consecutive non-empty pieces that together are the text.
  // Bytes that are not valid UTF-8 become pieces of their own and are not
  // given to the patterns.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Compiled;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace tandem
