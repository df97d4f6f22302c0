// SentencePiece-style BPE with byte fallback (GGUF model "llama": Llama 2,
// Phi-3, ...): spaces become "▁" (U+2581), a space is put before the text (and
// after each special token) when add_space_prefix, adjacent symbols merge
// highest piece score first, and a character that is not a piece becomes its
// <0xNN> byte tokens.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/vocab_tokenizer.h"

namespace tandem {

class SpmTokenizer : public VocabTokenizer {
 public:
  // vocab.scores must hold one score per token.
  SpmTokenizer(Vocab vocab, const SpecialIds& ids, bool add_space_prefix);

  std::vector<int> encode(std::string_view text, bool add_bos, bool parse_special) const override;
  std::string_view kind() const override { return "spm"; }

 private:
  void encode_text(std::string_view text, std::vector<int>& out) const;  // text: spaces as ▁
  void emit_symbol(std::string_view sym, std::vector<int>& out) const;
  std::string normal_token_bytes(int id) const override;

  bool add_space_prefix_;
  std::vector<bool> mergeable_;  // pieces that merging may produce
  int byte_ids_[256];            // <0xNN> tokens, -1 when missing
};

}  // namespace tandem
