// The weights the forward pass reads, fetched by name from a TensorSet with
// their types and shapes checked (a bad file fails here, clearly, not later).
#pragma once
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/tensor_set.h"

namespace tandem {

struct LayerWeights {
  TensorView attn_norm;       // {d_model} F32
  TensorView wq, wk, wv, wo;  // {d_model, n_heads*hd}, {d_model, n_kv*hd} x2, {n_heads*hd, d_model}
  TensorView bq, bk, bv;      // biases (qwen2), empty when absent
  TensorView ffn_norm;        // {d_model}
  TensorView w_gate, w_up;    // {d_model, d_ff}
  TensorView w_down;          // {d_ff, d_model}
};

struct ModelWeights {
  TensorView tok_embd;     // {d_model, vocab}
  TensorView output_norm;  // {d_model}
  TensorView output;       // {d_model, vocab}; tok_embd when embeddings are tied
  std::vector<LayerWeights> layers;
};

ModelWeights bind_weights(const ModelConfig& c, const TensorSet& tensors);

}  // namespace tandem
