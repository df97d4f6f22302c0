#include "hf_fixture.h"

#include "fuzz_support.h"

namespace tandem::fuzz {

test::SyntheticSpec tiny_spec() {
  test::SyntheticSpec spec;
  spec.n_layers = 1;
  spec.d_model = 32;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.d_ff = 64;
  return spec;
}

const std::string& hf_fixture_dir() {
  static const ScratchDir dir("hf");
  static const std::string path = test::write_synthetic_hf_dir(tiny_spec(), dir.path());
  return path;
}

}  // namespace tandem::fuzz
