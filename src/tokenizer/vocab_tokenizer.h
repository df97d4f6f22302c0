// What the byte-level BPE and SentencePiece tokenizers share: the vocabulary,
// special-token matching, token types and the ids of BOS / EOS / end of turn.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace tandem {

class VocabTokenizer : public Tokenizer {
 public:
  int vocab_size() const override { return vocab_.size(); }
  const std::string& piece(int id) const override;
  bool is_special(int id) const override;
  std::string token_bytes(int id, bool include_special = true) const override;
  std::string_view pre() const override { return pre_; }
  const Vocab& vocab() const { return vocab_; }

 protected:
  // `specials` are the token texts to recognise in input; when empty they are
  // taken from the control and user-defined token types.
  VocabTokenizer(Vocab vocab, const SpecialIds& ids, std::string pre,
                 std::vector<SpecialTokenText> specials);

  // The bytes of a normal token (the vocabulary's encoding undone).
  virtual std::string normal_token_bytes(int id) const = 0;
  std::optional<int> lookup_piece(std::string_view piece) const override {
    return vocab_.find(piece);
  }
  // Splits text at special tokens (see SpecialTokenMatcher).
  std::vector<TextFragment> partition(std::string_view text, bool parse_special) const {
    return specials_.partition(text, parse_special);
  }
  void check_id(int id) const;

  Vocab vocab_;
  std::string pre_;
  int unk_id_ = -1;

 private:
  SpecialTokenMatcher specials_;
};

}  // namespace tandem
