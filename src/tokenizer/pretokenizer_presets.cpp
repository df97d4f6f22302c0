#include "tokenizer/pretokenizer_presets.h"

#include <map>

namespace tandem {
namespace {

using namespace pretok_regex;

// Digits one at a time, then GPT-2's regex (StarCoder, SmolLM: a Digits
// pre-tokenizer with individual_digits before ByteLevel).
PreTokenizerPreset starcoder() { return {{R"(\p{N})", kGpt2}}; }

const std::map<std::string, PreTokenizerPreset, std::less<>>& presets() {
  static const std::map<std::string, PreTokenizerPreset, std::less<>> m = [] {
    std::map<std::string, PreTokenizerPreset, std::less<>> p;
    PreTokenizerPreset llama3{{kLlama3}, /*ignore_merges=*/true, /*add_bos=*/true};
    p["llama-bpe"] = llama3;
    p["llama3"] = llama3;
    p["llama-v3"] = llama3;
    p["dbrx"] = {{kLlama3}};
    p["smaug-bpe"] = {{kLlama3}};
    p["qwen2"] = {{kQwen2}};
    p["stablelm2"] = {{kQwen2}};
    p["gpt-2"] = {{kGpt2}};
    p["mpt"] = {{kGpt2}};
    p["olmo"] = {{kGpt2}};
    for (const char* name : {"starcoder", "smollm", "refact", "command-r", "codeshell"})
      p[name] = starcoder();
    p["deepseek-coder"] = {{
        R"([\r\n])",
        R"(\s?\p{L}+)",
        R"(\s?\p{P}+)",
        "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",  // CJK ideographs, kana etc., Hangul
        R"(\p{N})",
    }};
    p["falcon"] = {{
        R"([\p{P}\$\+<=>\^~\|`]+)",
        R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
        R"([0-9][0-9][0-9])",
    }};
    // llama.cpp's fallback for BPE vocabularies without a known pre-tokenizer.
    p["default"] = {{
        R"([\p{P}\$\+<=>\^~\|]+)",
        R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
        R"(\p{N}+)",
        R"([0-9][0-9][0-9])",
    }};
    return p;
  }();
  return m;
}

}  // namespace

std::optional<PreTokenizerPreset> find_pretokenizer_preset(std::string_view name) {
  auto it = presets().find(name);
  if (it == presets().end()) return std::nullopt;
  return it->second;
}

std::string known_pretokenizer_presets() {
  std::string out;
  for (const auto& [name, p] : presets()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace tandem
