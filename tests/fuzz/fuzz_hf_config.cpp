// config.json of a Hugging Face model directory, loaded the way `-m DIR` does:
// the configuration (architecture, sizes, rope scaling), then the checkpoint's
// tensors renamed, q/k permuted by the configured head counts and bound by
// shape. A bad config must fail with tandem::Error before anything is sized
// by its numbers.
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "hf_fixture.h"
#include "model/hf_loader.h"
#include "model/weights.h"

using namespace tandem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = fuzz::hf_fixture_dir();
  fuzz::write_file(dir + "/config.json", data, size);
  try {
    HFModelFiles hf = load_hf_model_dir(dir);
    const ModelConfig& c = hf.config;
    FUZZ_CHECK(c.n_layers > 0 && c.d_model > 0 && c.head_dim > 0 && c.vocab_size > 0);
    FUZZ_CHECK(c.rope_freq_factors.empty() ||
               static_cast<int>(c.rope_freq_factors.size()) == c.head_dim / 2);
    (void)bind_weights(c, hf.tensors);
  } catch (const Error&) {
  }
  return 0;
}
