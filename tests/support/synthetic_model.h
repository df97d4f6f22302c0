// Synthetic models for fast tests: random weights at small dimensions, written
// with the project's own GGUF and safetensors writers. The same spec and seed
// give the same weights in both formats, so loads can be compared bit for bit.
//
// Weights are uniform(-a, a) with a = sqrt(3 / fan_in) (unit-variance outputs for
// unit-variance inputs), embeddings uniform(-1, 1), norm weights 1 +- 0.1 and
// biases +-0.1, from a splitmix64 stream of spec.seed: identical on every
// platform and standard library.
//
// With with_tokenizer, both formats carry the same small byte-level BPE
// vocabulary: token b (b < 256) is the GPT-2 byte-level symbol of byte b, then
// the tokens of 64 merges learnt from a fixed English/code sample, "<unused_N>"
// padding, and the architecture's special tokens as the last ids:
//   llama: <|begin_of_text|> <|end_of_text|> <|start_header_id|> <|end_header_id|>
//          <|eot_id|> (pre "llama-bpe", Llama 3 chat template, BOS added)
//   qwen2: <|endoftext|> <|im_start|> <|im_end|> (pre "qwen2", ChatML template)
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "model/config.h"

namespace tandem::test {

struct SyntheticSpec {
  Arch arch = Arch::Llama;
  DType weight_type = DType::F32;  // the matrices (attention, FFN)
  // token_embd (and output when untied); unset: the same as weight_type. GGUF only.
  std::optional<DType> embed_type;
  int n_layers = 2;
  int d_model = 64;  // a multiple of the weight types' block sizes (256 for K-quants)
  int n_heads = 4;
  int n_kv_heads = 2;
  int d_ff = 128;
  int vocab_size = 384;  // byte-level: 256 byte tokens + merges + specials
  int context_length = 512;
  float rope_theta = 10000.0f;
  bool tied_embeddings = false;
  bool llama3_rope_scaling = false;  // rope_scaling type llama3 (factor 8, orig ctx 64)
  bool with_tokenizer = true;        // a small byte-level BPE vocabulary (gpt2 model)
  uint64_t seed = 1;
};

// Write a GGUF model to `path` (returns path). Weights quantized to the spec's types.
std::string write_synthetic_gguf(const SyntheticSpec& spec, const std::string& path);
// Write a Hugging Face directory (config.json, model.safetensors, tokenizer.json,
// tokenizer_config.json, generation_config.json) with every tensor in
// spec.weight_type, which must be F32, F16 or BF16. HF layout: unpermuted llama
// q/k. sharded: split the weights over two files with model.safetensors.index.json.
// For float weight types the GGUF and HF writers store identical values, so the
// two loads give bit-identical logits.
std::string write_synthetic_hf_dir(const SyntheticSpec& spec, const std::string& dir,
                                   bool sharded = false);

// The bytes of a safetensors file with the given header text and data section,
// unchecked: for building damaged files and dtypes SafetensorsWriter refuses.
std::string raw_safetensors(const std::string& header_json, const std::string& data);

}  // namespace tandem::test
