// Hyperparameters of a Llama-family model, read from GGUF metadata or a
// Hugging Face config.json. Everything the forward pass needs to know about
// the architecture lives here.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kernels/rope_style.h"

namespace tandem {

class GGUFFile;

enum class Arch { Llama, Qwen2 };

struct RopeScaling {
  // Llama3 is applied through ModelConfig::rope_freq_factors (llama3_rope_factors).
  enum class Type { None, Linear, Llama3 };
  Type type = Type::None;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;        // llama3
  float high_freq_factor = 4.0f;       // llama3
  int original_context_length = 8192;  // llama3
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;  // "llama" or "qwen2"
  std::string name;       // general.name or the directory name
  int n_layers = 0;
  int d_model = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int d_ff = 0;
  int vocab_size = 0;
  int context_length = 0;
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  RopeScaling rope_scaling;
  // Per-frequency divisors of the rotary frequencies: a GGUF `rope_freqs.weight`
  // tensor (how llama.cpp's converter stores Llama 3.1 scaling), or computed from
  // config.json's llama3 rope_scaling with llama3_rope_factors; empty when unscaled.
  std::vector<float> rope_freq_factors;
  kernels::RopeStyle rope_style = kernels::RopeStyle::Normal;
  bool tied_embeddings = false;  // no separate output matrix: the LM head is tok_embd
  bool qkv_bias = false;         // qwen2

  // Checks internal consistency (positive sizes, heads divide d_model, GQA ratio);
  // `source` names the file in the error.
  void validate(const std::string& source) const;
};

ModelConfig config_from_gguf(const GGUFFile& f);
// config.json of a Hugging Face model directory; `source` names the file in errors.
// Rope style is NeoX for both architectures: HF checkpoints keep q/k unpermuted
// (the HF loader permutes llama q/k into GGUF's interleaved layout, see hf_loader.h,
// and then sets Normal so both sources run the same kernels).
ModelConfig config_from_hf_json(const nlohmann::json& j, const std::string& source);

// head_dim/2 inverse frequencies with rope scaling applied.
std::vector<float> rope_inv_freq(const ModelConfig& c);
// The head_dim/2 float32 divisors that Llama 3.1 rope scaling (c.rope_scaling,
// type Llama3) applies to the frequencies, as GGUF's rope_freqs.weight stores them.
std::vector<float> llama3_rope_factors(const ModelConfig& c);

}  // namespace tandem
