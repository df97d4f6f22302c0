// Hugging Face model directories: config.json, model.safetensors or shards with
// model.safetensors.index.json, tokenizer.json, tokenizer_config.json
// (chat_template), generation_config.json. Tensors are renamed to GGUF names;
// llama q/k projection rows are permuted into GGUF's interleaved rope layout so
// both formats run the same kernels and give identical logits.
#pragma once
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

}  // namespace tandem
