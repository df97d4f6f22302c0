// A small Hugging Face model directory (config.json, model.safetensors,
// tokenizer.json, tokenizer_config.json, generation_config.json) written once
// per process, over which the HF fuzz targets write the one file they fuzz.
#pragma once
#include <string>

#include "support/synthetic_model.h"

namespace tandem::fuzz {

// The smallest synthetic llama the seeds and fixtures use: one layer, d_model 32.
test::SyntheticSpec tiny_spec();

// The directory; created on first use, removed at exit.
const std::string& hf_fixture_dir();

}  // namespace tandem::fuzz
