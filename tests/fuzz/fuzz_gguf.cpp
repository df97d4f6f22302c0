// GGUF files: header, metadata of every type, tensor infos (dimensions, types,
// offsets), then what a model load does with them: the configuration, the
// weights bound by name and shape, the tokenizer. A bad file must fail with
// tandem::Error; a file that loads must describe tensors that lie inside it.
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/gguf_reader.h"
#include "model/config.h"
#include "model/tensor_set.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_probe.h"

using namespace tandem;

namespace {

void check_tensors(const GGUFFile& f, size_t file_size) {
  for (const TensorView& t : f.tensors()) {
    FUZZ_CHECK(!t.shape.empty() && t.shape.size() <= 4);
    uint64_t elements = 1;
    for (int64_t d : t.shape) {
      FUZZ_CHECK(d > 0);
      FUZZ_CHECK(static_cast<uint64_t>(d) <= (uint64_t{1} << 48) / elements);
      elements *= static_cast<uint64_t>(d);
    }
    FUZZ_CHECK(static_cast<uint64_t>(t.numel()) == elements);
    FUZZ_CHECK(t.nbytes == t.row_bytes() * (elements / static_cast<uint64_t>(t.ne(0))));
    FUZZ_CHECK(t.nbytes <= file_size);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir dir("gguf");
  const std::string path = dir.write("input.gguf", data, size);
  try {
    GGUFFile f(path);
    check_tensors(f, size);
    for (const auto& [key, value] : f.metadata()) (void)gguf_value_to_string(value);
    try {
      ModelConfig c = config_from_gguf(f);
      TensorSet ts;
      ts.source = path;
      for (const auto& t : f.tensors()) ts.tensors.emplace(t.name, t);
      (void)bind_weights(c, ts);
    } catch (const Error&) {
    }
    if (f.has("tokenizer.ggml.model")) {
      try {
        fuzz::probe_tokenizer(*Tokenizer::from_gguf(f));
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
