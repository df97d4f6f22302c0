#include "hf_fixture.h"

#include "fuzz_support.h"
#include "support/synthetic_model.h"

namespace tandem::fuzz {

const std::string& hf_fixture_dir() {
  static const ScratchDir dir("hf");
  static const std::string path = [] {
    test::SyntheticSpec spec;
    spec.n_layers = 1;
    spec.d_model = 32;
    spec.n_heads = 4;
    spec.n_kv_heads = 2;
    spec.d_ff = 64;
    return test::write_synthetic_hf_dir(spec, dir.path());
  }();
  return path;
}

}  // namespace tandem::fuzz
