// Unicode Normalization Form C (canonical decomposition, then canonical
// composition), as Hugging Face tokenizers apply for an "NFC" normalizer
// (Qwen2's tokenizer.json).
#pragma once
#include <string>
#include <string_view>

namespace tandem {

// Bytes that are not valid UTF-8 are kept as they are.
std::string nfc_normalize(std::string_view text);

}  // namespace tandem
