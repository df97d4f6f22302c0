// Hugging Face model directories: config.json, model.safetensors or shards with
// model.safetensors.index.json, tokenizer.json, tokenizer_config.json
// (chat_template), generation_config.json. Tensors are renamed to GGUF names;
// llama q/k projection rows are permuted into GGUF's interleaved rope layout so
// both formats run the same kernels and give identical logits.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/tensor_set.h"

namespace tandem {

struct HFModelFiles {
  ModelConfig config;  // rope_style Normal for llama (q/k permuted), NeoX for qwen2
  TensorSet tensors;
  std::string tokenizer_json_path;  // "" when absent
  std::string chat_template;        // from tokenizer_config.json, "" when absent
  std::vector<int> eos_token_ids;   // generation_config.json (may be a list), then config.json
  int bos_token_id = -1;
};

bool is_hf_model_dir(const std::string& path);
HFModelFiles load_hf_model_dir(const std::string& dir);  // throws tandem::Error

// The GGUF name of a Hugging Face tensor ("model.layers.3.mlp.up_proj.weight" ->
// "blk.3.ffn_up.weight"), or nullopt for tensors tandem does not use.
std::optional<std::string> hf_to_gguf_tensor_name(const std::string& hf_name);

// llama.cpp's converter stores llama q/k projections with the two halves of each
// head's rows interleaved (rows h*d + 2i + j come from h*d + j*d/2 + i, d =
// rows / n_head), which turns rotate-half RoPE into rotate-adjacent-pairs RoPE.
// Returns, for each destination row, the source row it takes.
std::vector<int64_t> llama_qk_row_order(int64_t rows, int n_head);
// `rows` rows of `row_bytes` bytes each, reordered by llama_qk_row_order.
std::vector<uint8_t> permute_llama_qk_rows(const uint8_t* data, int64_t rows, size_t row_bytes,
                                           int n_head);

}  // namespace tandem
