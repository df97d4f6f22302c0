#include "support/byte_vocabulary.h"

#include <optional>
#include <string>
#include <vector>

namespace tandem::test {

std::shared_ptr<const structured::TokenVocabulary> byte_vocabulary() {
  static const auto v = [] {
    std::vector<std::optional<std::string>> bytes(kByteVocabularyEog + 1);
    for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
    return std::make_shared<structured::TokenVocabulary>(bytes,
                                                         std::vector<int>{kByteVocabularyEog});
  }();
  return v;
}

}  // namespace tandem::test
