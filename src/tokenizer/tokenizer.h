// Tokenizers of Llama-family models, loaded from GGUF metadata or a Hugging Face
// tokenizer.json:
//  - byte-level BPE (GGUF model "gpt2"; HF "BPE" with a ByteLevel pre-tokenizer):
//    a pre-tokenizer regex splits the text, bytes map to printable code points,
//    merges by rank. Pre-tokenizers: llama-bpe (Llama 3), qwen2, smollm / gpt-2,
//    plus whatever the test vocabularies need;
//  - SentencePiece-style BPE with byte fallback (GGUF model "llama", e.g. Llama 2):
//    merges by piece score, "▁" for spaces, <0xNN> byte tokens for unknown bytes.
// Special (control / user-defined) tokens are matched whole in the text when
// parse_special is true and never produced by merging.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class GGUFFile;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Throws tandem::Error naming the file and the field at fault.
  static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& f);
  // A Hugging Face tokenizer.json holding a byte-level BPE model (other models,
  // normalizers other than NFC, pre-tokenizers other than Split / Digits /
  // ByteLevel are refused); tokenizer_config.json beside it, when present,
  // supplies add_bos_token / bos / eos settings.
  static std::unique_ptr<Tokenizer> from_hf_json(const std::string& path);

  // Text to ids. add_bos prepends the BOS token (tandem::Error when there is
  // none); parse_special recognises the text of control tokens (e.g.
  // "<|eot_id|>") as those tokens. User-defined tokens (e.g. "<tool_call>") are
  // recognised either way, as llama.cpp and Hugging Face do. Bytes that are not
  // UTF-8 are encoded as bytes.
  virtual std::vector<int> encode(std::string_view text, bool add_bos,
                                  bool parse_special) const = 0;
  // The bytes a token stands for (may be part of a UTF-8 character). Control
  // tokens (BOS, <|eot_id|>, ...) give their text when include_special, else "";
  // user-defined tokens (text-like added tokens such as "<tool_call>") always
  // give their text. Throws tandem::Error for an id outside the vocabulary.
  virtual std::string token_bytes(int id, bool include_special = true) const = 0;
  // ids to bytes (not checked for UTF-8 validity). A leading space that
  // SentencePiece encoding added is removed: the one before the first text and
  // the one the encoder puts after each special token.
  std::string decode(const std::vector<int>& ids, bool include_special = true) const;
  // One step of decode(): token_bytes() with the added space removed where
  // decode() removes it. `at_text_start` carries the state from token to token
  // and starts as true.
  std::string decode_piece(int id, bool include_special, bool& at_text_start) const;

  virtual int vocab_size() const = 0;
  virtual std::string_view kind() const = 0;  // "bpe" (byte-level) or "spm"
  virtual std::string_view pre() const = 0;   // pre-tokenizer name ("llama-bpe", "qwen2", ...)
  // The text of a token as stored in the vocabulary.
  virtual const std::string& piece(int id) const = 0;
  std::optional<int> find_piece(std::string_view piece) const;
  virtual bool is_special(int id) const = 0;  // control / user-defined tokens

  int bos_id() const { return bos_id_; }  // -1 when the vocabulary has none
  int eos_id() const { return eos_id_; }
  bool add_bos() const { return add_bos_; }  // whether prompts start with BOS by default
  // End-of-generation ids: EOS, EOT (<|eot_id|>, <|im_end|>, <|end|>, ...), EOM.
  const std::vector<int>& eog_ids() const { return eog_ids_; }
  bool is_eog(int id) const;
  // Whether decoding drops one leading space (SentencePiece's added prefix).
  bool strips_leading_space() const { return strip_leading_space_; }

 protected:
  virtual std::optional<int> lookup_piece(std::string_view piece) const = 0;

  int bos_id_ = -1, eos_id_ = -1;
  bool add_bos_ = false;
  bool strip_leading_space_ = false;
  std::vector<int> eog_ids_;
};

// Incremental detokenization for streaming: push() returns only complete UTF-8
// characters; bytes of a character split across tokens wait for the rest.
// Invalid sequences come out as U+FFFD once it is clear they cannot complete.
class StreamDecoder {
 public:
  // at_text_start: the first token begins a text (SentencePiece then drops the
  // space it added); false when decoding a continuation, such as generated tokens.
  explicit StreamDecoder(const Tokenizer& tok, bool include_special = false,
                         bool at_text_start = true);
  std::string push(int id);
  std::string flush();  // whatever is pending, invalid bytes replaced by U+FFFD

 private:
  const Tokenizer& tok_;
  bool include_special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace tandem
