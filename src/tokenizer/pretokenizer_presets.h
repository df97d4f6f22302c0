// The pre-tokenizers of byte-level BPE vocabularies by their GGUF name
// (`tokenizer.ggml.pre`): the split regexes of each model family's
// tokenizer.json, in the order they are applied.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

struct PreTokenizerPreset {
  std::vector<std::string> patterns;
  bool ignore_merges = false;  // a word that is itself a token skips merging (Llama 3)
  bool add_bos = false;        // the family's default when the GGUF does not say
};

std::optional<PreTokenizerPreset> find_pretokenizer_preset(std::string_view name);
// "a, b, c" for error messages.
std::string known_pretokenizer_presets();

// The patterns of some families, also used to name the pre-tokenizer of a
// tokenizer.json whose regexes are the same.
namespace pretok_regex {
// GPT-2 (also Hugging Face's ByteLevel pre-tokenizer with use_regex).
inline constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 and Qwen2 differ only in digits: up to three per piece, or one.
inline constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}  // namespace pretok_regex

}  // namespace tandem
