// How a model's weights lay out the pairs that rotary position embedding rotates.
#pragma once

namespace tandem::kernels {

enum class RopeStyle {
  Normal,  // rotate adjacent pairs (2i, 2i+1): GGUF llama (weights pre-permuted)
  NeoX,    // rotate pairs (i, i + d/2): qwen2, Hugging Face layout
};

}  // namespace tandem::kernels
