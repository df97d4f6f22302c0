#include "model/forward_state.h"

#include "core/error.h"

namespace tandem {

ForwardState::ForwardState(const ModelConfig& c, int max_tokens_) : max_tokens(max_tokens_) {
  check(max_tokens >= 1, "forward: at least one position per pass, got {}", max_tokens);
  const size_t n = static_cast<size_t>(max_tokens);
  const size_t q_dim = size_t(c.n_heads) * c.head_dim, kv_dim = size_t(c.n_kv_heads) * c.head_dim;
  x.resize(n * c.d_model);
  xn.resize(n * c.d_model);
  q.resize(n * q_dim);
  k.resize(n * kv_dim);
  v.resize(n * kv_dim);
  attn.resize(n * q_dim);
  gate.resize(n * c.d_ff);
  up.resize(n * c.d_ff);
  hidden.resize(n * c.d_ff);
  out.resize(n * c.d_model);
  rope_cos.resize(n * (c.head_dim / 2));
  rope_sin.resize(n * (c.head_dim / 2));
  runs.reserve(n);
  attention_calls.reserve(n);
  remap.reserve(4 * n);
}

}  // namespace tandem
