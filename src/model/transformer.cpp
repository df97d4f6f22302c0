#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/quants.h"

namespace tandem {
namespace {

std::vector<float> to_f32(const TensorView& t) {
  if (t.empty()) return {};
  std::vector<float> out(static_cast<size_t>(t.numel()));
  dequantize_row(t.type, t.data, out.data(), t.numel());
  return out;
}

}  // namespace

void ForwardBatch::add_sequence(int slot, const int* ids, int n, int start, bool all_logits,
                                bool last_logits) {
  for (int i = 0; i < n; ++i) {
    if (all_logits || (last_logits && i == n - 1)) logit_rows.push_back(size());
    tokens.push_back(ids[i]);
    positions.push_back(start + i);
    slots.push_back(slot);
  }
}

Transformer::Transformer(const Model& model, ThreadPool& pool)
    : model_(model), c_(model.config()), pool_(pool), inv_freq_(rope_inv_freq(c_)) {
  for (const auto& L : model.weights().layers)
    layer_f32_.push_back({to_f32(L.attn_norm), to_f32(L.ffn_norm), to_f32(L.bq), to_f32(L.bk),
                          to_f32(L.bv)});
  output_norm_ = to_f32(model.weights().output_norm);
}

KVCacheShape Transformer::cache_shape() const {
  return {c_.n_layers, c_.n_kv_heads, c_.head_dim};
}

void Transformer::ensure_scratch(int n) {
  if (n <= scratch_tokens_) return;
  scratch_tokens_ = n;
  const size_t N = static_cast<size_t>(n);
  const size_t q_dim = size_t(c_.n_heads) * c_.head_dim, kv_dim = size_t(c_.n_kv_heads) * c_.head_dim;
  x_.resize(N * c_.d_model);
  xn_.resize(N * std::max<size_t>(c_.d_model, q_dim));
  q_.resize(N * q_dim);
  k_.resize(N * kv_dim);
  v_.resize(N * kv_dim);
  attn_.resize(N * q_dim);
  gate_.resize(N * c_.d_ff);
  up_.resize(N * c_.d_ff);
  hidden_.resize(N * c_.d_ff);
  out_.resize(N * c_.d_model);
}

void Transformer::validate(const ForwardBatch& b, KVCache& cache) const {
  const int n = b.size();
  check(n > 0, "forward: empty batch");
  check(static_cast<int>(b.positions.size()) == n && static_cast<int>(b.slots.size()) == n,
        "forward: tokens, positions and slots differ in length");
  for (int i = 0; i < n; ++i) {
    check(b.tokens[i] >= 0 && b.tokens[i] < c_.vocab_size,
          "forward: token id {} outside the vocabulary [0, {})", b.tokens[i], c_.vocab_size);
    bool run_start = i == 0 || b.slots[i] != b.slots[i - 1];
    int expect = run_start ? cache.length(b.slots[i]) : b.positions[i - 1] + 1;
    check(b.positions[i] == expect,
          "forward: slot {} token {} has position {}, expected {} (positions must continue "
          "the cache)", b.slots[i], i, b.positions[i], expect);
    check(b.positions[i] < c_.context_length,
          "forward: position {} beyond the model's context length {}", b.positions[i],
          c_.context_length);
  }
  for (int r : b.logit_rows) check(r >= 0 && r < n, "forward: logit row {} outside the batch", r);
}

void Transformer::forward(const ForwardBatch& b, KVCache& cache, float* logits) {
  validate(b, cache);
  const int n = b.size();
  ensure_scratch(n);
  const int d = c_.d_model, hd = c_.head_dim;
  const int q_dim = c_.n_heads * hd, kv_dim = c_.n_kv_heads * hd;
  const auto& W = model_.weights();

  // Reserve cache room for each slot's run; lengths advance after the last layer.
  struct Run { int slot, begin, end; };
  std::vector<Run> runs;
  for (int i = 0; i < n; ++i) {
    if (i == 0 || b.slots[i] != b.slots[i - 1]) runs.push_back({b.slots[i], i, i});
    runs.back().end = i + 1;
  }
  for (const auto& r : runs)
    check(cache.reserve(r.slot, b.positions[r.end - 1] + 1),
          "forward: KV cache has no room for slot {} up to position {}", r.slot,
          b.positions[r.end - 1]);

  for (int i = 0; i < n; ++i) kernels::get_row(W.tok_embd, b.tokens[i], &x_[size_t(i) * d]);

  const int half = hd / 2;
  rope_cos_.resize(size_t(n) * half);
  rope_sin_.resize(size_t(n) * half);
  for (int i = 0; i < n; ++i)
    kernels::rope_angles(b.positions[i], inv_freq_.data(), half, &rope_cos_[size_t(i) * half],
                         &rope_sin_[size_t(i) * half]);

  const kernels::AttentionShape ashape{c_.n_heads, c_.n_kv_heads, hd,
                                       1.0f / std::sqrt(static_cast<float>(hd))};
  for (int l = 0; l < c_.n_layers; ++l) {
    const auto& L = W.layers[l];
    const auto& F = layer_f32_[l];
    // Attention block.
    for (int i = 0; i < n; ++i)
      kernels::rmsnorm(&x_[size_t(i) * d], F.attn_norm.data(), d, c_.norm_eps, &xn_[size_t(i) * d]);
    {  // Q, K and V in one parallel region, the input quantized once.
      const TensorView* w[] = {&L.wq, &L.wk, &L.wv};
      float* y[] = {q_.data(), k_.data(), v_.data()};
      kernels::matmul_multi(w, 3, xn_.data(), n, y, pool_);
    }
    for (int i = 0; i < n; ++i) {
      float* q = &q_[size_t(i) * q_dim];
      float* k = &k_[size_t(i) * kv_dim];
      float* v = &v_[size_t(i) * kv_dim];
      if (!F.bq.empty()) {
        kernels::add_inplace(q, F.bq.data(), q_dim);
        kernels::add_inplace(k, F.bk.data(), kv_dim);
        kernels::add_inplace(v, F.bv.data(), kv_dim);
      }
      const float* cos = &rope_cos_[size_t(i) * half];
      const float* sin = &rope_sin_[size_t(i) * half];
      kernels::rope(q, c_.n_heads, hd, cos, sin, c_.rope_style);
      kernels::rope(k, c_.n_kv_heads, hd, cos, sin, c_.rope_style);
      cache.store(b.slots[i], l, b.positions[i], k, v);
    }
    for (const auto& r : runs)
      kernels::attention(&q_[size_t(r.begin) * q_dim], r.end - r.begin, &b.positions[r.begin],
                         cache.view(r.slot, l), ashape, &attn_[size_t(r.begin) * q_dim], pool_);
    kernels::matmul(L.wo, attn_.data(), n, out_.data(), pool_);
    for (int i = 0; i < n; ++i)
      kernels::add_inplace(&x_[size_t(i) * d], &out_[size_t(i) * d], d);

    // Feed-forward block (SwiGLU).
    for (int i = 0; i < n; ++i)
      kernels::rmsnorm(&x_[size_t(i) * d], F.ffn_norm.data(), d, c_.norm_eps, &xn_[size_t(i) * d]);
    {
      const TensorView* w[] = {&L.w_gate, &L.w_up};
      float* y[] = {gate_.data(), up_.data()};
      kernels::matmul_multi(w, 2, xn_.data(), n, y, pool_);
    }
    // The positions' gate, up and hidden rows are contiguous: one element-wise
    // pass over all of them, shared by the threads.
    pool_.parallel_for(
        int64_t{n} * c_.d_ff,
        [&](int64_t b0, int64_t b1, int) {
          kernels::swiglu(&gate_[b0], &up_[b0], static_cast<int>(b1 - b0), &hidden_[b0]);
        },
        64);
    kernels::matmul(L.w_down, hidden_.data(), n, out_.data(), pool_);
    for (int i = 0; i < n; ++i)
      kernels::add_inplace(&x_[size_t(i) * d], &out_[size_t(i) * d], d);
  }
  for (const auto& r : runs) cache.set_length(r.slot, b.positions[r.end - 1] + 1);

  // Final norm and LM head, only for the rows whose logits are wanted.
  const int m = static_cast<int>(b.logit_rows.size());
  if (m == 0) return;
  for (int j = 0; j < m; ++j)
    kernels::rmsnorm(&x_[size_t(b.logit_rows[j]) * d], output_norm_.data(), d, c_.norm_eps,
                     &xn_[size_t(j) * d]);
  if (output_ranges_.empty()) {
    kernels::matmul(W.output, xn_.data(), m, logits, pool_);
    return;
  }
  const int V = vocab_size();
  std::fill(logits, logits + size_t(m) * V, -std::numeric_limits<float>::infinity());
  for (auto [begin, end] : output_ranges_) {
    const TensorView part = kernels::row_range(W.output, begin, end);
    resize_scratch(range_logits_, size_t(m) * (end - begin));
    kernels::matmul(part, xn_.data(), m, range_logits_.data(), pool_);
    for (int j = 0; j < m; ++j)
      std::copy_n(&range_logits_[size_t(j) * (end - begin)], end - begin,
                  logits + size_t(j) * V + begin);
  }
}

void Transformer::restrict_output(std::vector<std::pair<int, int>> ranges) {
  for (auto [b, e] : ranges)
    check(0 <= b && b < e && e <= vocab_size(), "output range [{}, {}) outside the vocabulary {}",
          b, e, vocab_size());
  output_ranges_ = std::move(ranges);
}

}  // namespace tandem
