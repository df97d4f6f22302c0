#include "tokenizer/vocab_tokenizer.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {
namespace {

// Texts of end-of-turn tokens that stop generation even when the metadata only
// names EOS (instruction-tuned models end turns with these).
constexpr const char* kEndOfTurnTexts[] = {
    "<|eot_id|>",    "<|eom_id|>", "<|im_end|>",    "<|end|>",
    "<|endoftext|>", "</s>",       "<end_of_turn>", "<|end_of_text|>",
};

int parse_byte_token(const std::string& piece) {  // "<0xNN>" -> NN, else -1
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    char c = piece[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

VocabTokenizer::VocabTokenizer(Vocab vocab, const SpecialIds& ids, std::string pre,
                               std::vector<SpecialTokenText> specials)
    : vocab_(std::move(vocab)), pre_(std::move(pre)) {
  vocab_.build_index();
  bos_id_ = ids.bos;
  eos_id_ = ids.eos;
  unk_id_ = ids.unk;
  add_bos_ = ids.add_bos && ids.bos >= 0;

  auto add_eog = [&](int id) {
    if (id >= 0 && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end())
      eog_ids_.push_back(id);
  };
  add_eog(ids.eos);
  add_eog(ids.eot);
  add_eog(ids.eom);
  for (const char* text : kEndOfTurnTexts)
    if (auto id = vocab_.find(text); id && is_special(*id)) add_eog(*id);

  if (specials.empty()) {
    for (int id = 0; id < vocab_.size(); ++id) {
      TokenType t = vocab_.types[id];
      if (t == TokenType::Control || t == TokenType::UserDefined)
        specials.push_back({vocab_.pieces[id], id, t == TokenType::Control});
    }
  }
  for (auto& s : specials) specials_.add(std::move(s));
}

void VocabTokenizer::check_id(int id) const {
  check(vocab_.valid_id(id), "token id {} is outside the vocabulary [0, {}) of {}", id,
        vocab_.size(), vocab_.source);
}

const std::string& VocabTokenizer::piece(int id) const {
  check_id(id);
  return vocab_.pieces[id];
}

bool VocabTokenizer::is_special(int id) const {
  if (!vocab_.valid_id(id)) return false;
  TokenType t = vocab_.types[id];
  return t == TokenType::Control || t == TokenType::UserDefined;
}

std::string VocabTokenizer::token_bytes(int id, bool include_special) const {
  check_id(id);
  switch (vocab_.types[id]) {
    case TokenType::UserDefined:  // stands for its text, like a normal token
      return vocab_.pieces[id];
    case TokenType::Control:
    case TokenType::Unknown:
    case TokenType::Unused:
      return include_special ? vocab_.pieces[id] : std::string();
    case TokenType::Byte:
      if (int b = parse_byte_token(vocab_.pieces[id]); b >= 0)
        return std::string(1, static_cast<char>(b));
      return normal_token_bytes(id);
    case TokenType::Normal:
    case TokenType::Undefined:
      break;
  }
  return normal_token_bytes(id);
}

}  // namespace tandem
