// tokenizer_config.json beside a valid tokenizer.json: the BOS/EOS token
// settings (strings or {"content": ...}), add_bos_token, and the chat template
// (a string or a list of named templates) as a model directory load reads it.
// A bad file must fail with tandem::Error naming it.
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "hf_fixture.h"
#include "model/hf_loader.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_probe.h"

using namespace tandem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = fuzz::hf_fixture_dir();
  fuzz::write_file(dir + "/tokenizer_config.json", data, size);
  try {
    fuzz::probe_tokenizer(*Tokenizer::from_hf_json(dir + "/tokenizer.json"));
  } catch (const Error&) {
  }
  try {
    HFModelFiles hf = load_hf_model_dir(dir);
    if (!hf.chat_template.empty()) (void)detect_chat_template(hf.chat_template);
  } catch (const Error&) {
  }
  return 0;
}
