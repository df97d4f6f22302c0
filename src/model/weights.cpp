#include "model/weights.h"

#include <fmt/format.h>

#include "core/error.h"
#include "kernels/kernels.h"

namespace tandem {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

// Fetch a tensor by name, checking its shape and that the type is one the
// kernels support; norms and biases must be float.
TensorView fetch(const TensorSet& ts, const std::string& name, std::vector<int64_t> shape,
                 bool optional = false, bool float_only = false) {
  const TensorView* t = ts.find(name);
  if (!t) {
    if (optional) return {};
    fail("{}: missing tensor '{}'", ts.source, name);
  }
  if (t->shape != shape)
    fail("{}: tensor '{}' has shape {}, expected {}", ts.source, name, shape_str(t->shape),
         shape_str(shape));
  if (float_only && t->type != DType::F32 && t->type != DType::F16 && t->type != DType::BF16)
    fail("{}: tensor '{}' has type {}, expected a float type", ts.source, name,
         dtype_name(t->type));
  switch (t->type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      break;
    default:
      fail("{}: tensor '{}' has unsupported type {}", ts.source, name, dtype_name(t->type));
  }
  return *t;
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const TensorSet& ts) {
  const int64_t d = c.d_model, ff = c.d_ff, V = c.vocab_size;
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim,
                kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  ModelWeights w;
  w.tok_embd = fetch(ts, "token_embd.weight", {d, V});
  w.output_norm = fetch(ts, "output_norm.weight", {d}, false, true);
  w.output = c.tied_embeddings ? w.tok_embd : fetch(ts, "output.weight", {d, V});
  for (int i = 0; i < c.n_layers; ++i) {
    auto n = [&](const char* s) { return fmt::format("blk.{}.{}", i, s); };
    LayerWeights L;
    L.attn_norm = fetch(ts, n("attn_norm.weight"), {d}, false, true);
    L.wq = fetch(ts, n("attn_q.weight"), {d, q_dim});
    L.wk = fetch(ts, n("attn_k.weight"), {d, kv_dim});
    L.wv = fetch(ts, n("attn_v.weight"), {d, kv_dim});
    L.wo = fetch(ts, n("attn_output.weight"), {q_dim, d});
    L.bq = fetch(ts, n("attn_q.bias"), {q_dim}, !c.qkv_bias, true);
    L.bk = fetch(ts, n("attn_k.bias"), {kv_dim}, !c.qkv_bias, true);
    L.bv = fetch(ts, n("attn_v.bias"), {kv_dim}, !c.qkv_bias, true);
    L.ffn_norm = fetch(ts, n("ffn_norm.weight"), {d}, false, true);
    L.w_gate = fetch(ts, n("ffn_gate.weight"), {d, ff});
    L.w_up = fetch(ts, n("ffn_up.weight"), {d, ff});
    L.w_down = fetch(ts, n("ffn_down.weight"), {ff, d});
    w.layers.push_back(std::move(L));
  }
  return w;
}

}  // namespace tandem
