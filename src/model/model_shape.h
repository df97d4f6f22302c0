// Real models' shapes without their weights: the dimensions and the tensor
// table (names, types, sizes) of the files tandem is measured with, and a GGUF
// writer that fills such a table with random weights.
//
// Why: the GPU machine cannot receive the real files (0.4 to 6.4 GB), so its
// benchmarks run models of exactly the real shapes and tensor types that tandem
// writes there (`tandem synth-model`). A decode step's cost depends on the
// shapes, the types and the bytes, not on the weights' values. The presets'
// tables are checked against the real GGUFs where those are present
// (tests/model/model_shape_test.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace tandem {

class GGUFWriter;

struct ShapeTensor {
  std::string name;  // GGUF name, e.g. "blk.3.ffn_down.weight"
  DType type;
  std::vector<int64_t> shape;  // GGML order: shape[0] is the row length
};

struct ModelShape {
  std::string name = {};  // the preset's name
  Arch arch = Arch::Llama;
  int n_layers = 0, d_model = 0, n_heads = 0, n_kv_heads = 0, d_ff = 0, vocab_size = 0;
  int context_length = 0;
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  // Llama 3.x's rope scaling (written as rope_freqs.weight, as llama.cpp does).
  bool llama3_rope_scaling = false;
  float rope_factor = 1.0f, rope_low_freq = 1.0f, rope_high_freq = 4.0f;
  int rope_original_context = 8192;
  std::vector<ShapeTensor> tensors = {};  // the tensor table

  int head_dim() const { return d_model / n_heads; }
  uint64_t bytes() const;  // the tensors' bytes, as a GGUF stores them
};

// The presets, by name: qwen2.5-coder-1.5b-q4_k_m and qwen2.5-coder-0.5b-q4_k_m
// (the tensor types of the Q4_K_M files `make models` fetches), llama-3.2-1b-bf16
// and llama-3.2-3b-bf16 (the design's pair, every matrix BF16).
std::vector<std::string> model_shape_names();
// Throws tandem::Error naming the unknown name and listing the known ones.
ModelShape model_shape(const std::string& name);

// The GGUF metadata of an architecture with these dimensions (general.*, then
// ARCH.block_count ... ARCH.vocab_size), named `name`: what every model file
// tandem writes starts with (this writer's and the tests' synthetic models).
void set_architecture_metadata(GGUFWriter& w, const ModelShape& shape, const std::string& name);

// Write a GGUF of `shape` with random weights from `seed`, and no tokenizer.
// Matrices: uniform(-a, a), a = sqrt(3 / fan_in), quantized to each tensor's
// type; norms 1 +- 0.1; biases +- 0.1. To write gigabytes in seconds, each
// (type, row length) quantizes a pool of distinct random rows once and a matrix
// takes its rows from that pool in a seeded order: every byte is a valid block
// of its type, and a step reads them all as it would a real file's.
void write_random_gguf(const ModelShape& shape, const std::string& path, uint64_t seed = 1);

}  // namespace tandem
