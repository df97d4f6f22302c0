// Byte-level BPE (GPT-2 style; Llama 3, Qwen2, SmolLM, StarCoder, ...): special
// tokens are cut out first, a regex pre-tokenizer splits the rest into words,
// each word's bytes become GPT-2 alphabet symbols, and adjacent symbols are
// merged lowest merge rank first until no listed merge applies.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/regex_splitter.h"
#include "tokenizer/vocab_tokenizer.h"

namespace tandem {

struct BpeOptions {
  std::string pre;                          // pre-tokenizer name, for display
  std::vector<std::string> split_patterns;  // applied in order (see RegexSplitter)
  bool ignore_merges = false;               // a word that is a token as a whole is not merged
  bool add_prefix_space = false;            // prepend " " to text that does not start with one
  bool nfc = false;  // NFC-normalise text before splitting (Qwen2's tokenizer.json)
};

class ByteLevelBpeTokenizer : public VocabTokenizer {
 public:
  // merges in rank order, as (left, right) token texts. Throws tandem::Error
  // naming vocab.source for a merge of texts that are not tokens.
  ByteLevelBpeTokenizer(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                        const SpecialIds& ids, BpeOptions opts,
                        std::vector<SpecialTokenText> specials = {});

  std::vector<int> encode(std::string_view text, bool add_bos, bool parse_special) const override;
  std::string_view kind() const override { return "bpe"; }

 private:
  struct Merge {
    int rank;
    int result;
  };
  static uint64_t pair_key(int left, int right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  void encode_text(std::string_view text, std::vector<int>& out) const;
  void encode_word(std::string_view word, std::vector<int>& out) const;  // word: raw bytes
  std::string normal_token_bytes(int id) const override;

  BpeOptions opts_;
  RegexSplitter splitter_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int, 256> byte_ids_{};  // the token of each single byte, -1 when missing
};

}  // namespace tandem
