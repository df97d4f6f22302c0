// A vocabulary of the 256 single bytes (ids 0-255) plus id 256 as the end of
// generation: matching text byte by byte with the structured matcher.
#pragma once
#include <memory>

#include "structured/token_vocabulary.h"

namespace tandem::test {

std::shared_ptr<const structured::TokenVocabulary> byte_vocabulary();
inline constexpr int kByteVocabularyEog = 256;

}  // namespace tandem::test
