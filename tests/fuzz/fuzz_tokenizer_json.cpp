// A Hugging Face tokenizer.json on its own (no tokenizer_config.json beside
// it): the BPE model, vocabulary, merges, added tokens, normalizer,
// pre-tokenizer and post-processor. A bad file must fail with tandem::Error; a
// tokenizer that loads must encode and decode without leaving its vocabulary.
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_probe.h"

using namespace tandem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir dir("tokenizer-json");
  const std::string path = dir.write("tokenizer.json", data, size);
  try {
    fuzz::probe_tokenizer(*Tokenizer::from_hf_json(path));
  } catch (const Error&) {
  }
  return 0;
}
