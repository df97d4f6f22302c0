// A tokenizer's vocabulary as loaded from GGUF or tokenizer.json: token texts,
// their types and (SentencePiece) scores, and a text -> id index.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem {

// GGUF's tokenizer.ggml.token_type values (SentencePiece's piece types).
enum class TokenType : int8_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,      // BOS, EOS, <|eot_id|>, ...: matched in text only with parse_special
  UserDefined = 4,  // added tokens that stand for text: always matched whole
  Unused = 5,
  Byte = 6,  // <0xNN>
};

struct Vocab {
  std::string source;  // the file it came from, for error messages
  std::vector<std::string> pieces;
  std::vector<TokenType> types;
  std::vector<float> scores;  // SentencePiece piece scores; empty for BPE

  int size() const { return static_cast<int>(pieces.size()); }
  bool valid_id(int id) const { return id >= 0 && id < size(); }
  // Builds the text -> id index; the lowest id wins when a text repeats.
  void build_index();
  std::optional<int> find(std::string_view piece) const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int, Hash, std::equal_to<>> index_;
};

// Ids of the tokens with a role, from metadata; -1 when absent.
struct SpecialIds {
  int bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;
  bool add_bos = false;
};

}  // namespace tandem
