// safetensors files: the header length, the JSON header (dtypes, shapes,
// data_offsets, __metadata__) and the data section it points into. A bad file
// must fail with tandem::Error; every tensor of a file that loads must lie
// inside the data section with as many bytes as its shape needs.
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/safetensors.h"

using namespace tandem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchDir dir("safetensors");
  const std::string path = dir.write("model.safetensors", data, size);
  try {
    SafetensorsFile f(path);
    const uint8_t* begin = f.mapping()->data();
    const uint8_t* end = begin + f.mapping()->size();
    for (const TensorView& t : f.tensors()) {
      FUZZ_CHECK(t.data >= begin && t.data <= end);
      FUZZ_CHECK(t.nbytes <= static_cast<size_t>(end - t.data));
      uint64_t elements = 1;
      for (int64_t d : t.shape) {
        FUZZ_CHECK(d >= 0);
        FUZZ_CHECK(!__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements));
      }
      FUZZ_CHECK(t.nbytes == elements * dtype_row_bytes(t.type, 1));
      FUZZ_CHECK(f.find(t.name) == &t);
    }
  } catch (const Error&) {
  }
  return 0;
}
