#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/output_ranges.h"
#include "quant/quants.h"

namespace tandem {
namespace {

std::vector<float> to_f32(const TensorView& t) {
  if (t.empty()) return {};
  std::vector<float> out(static_cast<size_t>(t.numel()));
  dequantize_row(t.type, t.data, out.data(), t.numel());
  return out;
}

// The largest call a pass makes of its kernels.
kernels::KernelLimits pass_limits(const ModelConfig& c, int max_tokens) {
  kernels::KernelLimits l;
  l.max_rows = max_tokens;
  l.max_k = std::max({int64_t{c.d_model}, int64_t{c.n_heads} * c.head_dim, int64_t{c.d_ff}});
  l.head_dim = c.head_dim;
  l.max_group = c.n_heads / c.n_kv_heads;
  return l;
}

}  // namespace

Transformer::Transformer(const Model& model, ThreadPool& pool, int max_tokens)
    : model_(model),
      c_(model.config()),
      state_(c_, max_tokens),
      kernels_(kernels::Kernels::create(model.kernel_config(), pool,
                                        pass_limits(c_, state_.max_tokens))),
      attention_shape_{c_.n_heads, c_.n_kv_heads, c_.head_dim,
                       1.0f / std::sqrt(static_cast<float>(c_.head_dim))},
      inv_freq_(rope_inv_freq(c_)) {
  for (const auto& L : model.weights().layers)
    layer_f32_.push_back(
        {to_f32(L.attn_norm), to_f32(L.ffn_norm), to_f32(L.bq), to_f32(L.bk), to_f32(L.bv)});
  output_norm_ = to_f32(model.weights().output_norm);
}

KVCacheShape Transformer::cache_shape() const { return {c_.n_layers, c_.n_kv_heads, c_.head_dim}; }

std::unique_ptr<KVCache> Transformer::make_cache(const KVCacheConfig& config) {
  return make_kv_cache(cache_shape(), config);
}

void Transformer::forward(const ForwardBatch& b, KVCache& cache, float* logits) {
  validate_forward_batch(b, cache, c_);
  reserve_forward_batch(b, cache);
  for (int begin = 0; begin < b.size(); begin += state_.max_tokens) {
    const int n = std::min(state_.max_tokens, b.size() - begin);
    const int* kv_positions = b.kv_positions.empty() ? b.positions.data() : b.kv_positions.data();
    const PassRows p{
        &b.tokens[begin], &b.positions[begin], kv_positions + begin, &b.slots[begin], begin, n};
    run_pass(b, p, cache, logits);
  }
  advance_forward_batch(b, cache);
}

void Transformer::run_pass(const ForwardBatch& b, const PassRows& p, KVCache& cache,
                           float* logits) {
  find_runs(b, p);
  embed(p);
  for (int l = 0; l < c_.n_layers; ++l) {
    attention_block(l, p, cache);
    ffn_block(l, p.n);
  }
  head(b, p, logits);
}

// The slots' chains of consecutive rows in the pass: each attends as one call.
// A chain continues while a row is the child of the row before it: its parent,
// or (no parent named) the row before holds the chain's previous position.
void Transformer::find_runs(const ForwardBatch& b, const PassRows& p) {
  auto& runs = state_.runs;
  runs.clear();
  state_.remap.clear();
  auto continues = [&](int i) {
    const int at = p.begin + i, parent = b.parent(at);
    return p.slots[i] == p.slots[i - 1] &&
           (parent == at - 1 || (parent == -1 && p.positions[i] == p.positions[i - 1] + 1 &&
                                 p.positions[i - 1] == p.kv_positions[i - 1]));
  };
  for (int i = 0; i < p.n; ++i) {
    if (i == 0 || !continues(i)) runs.push_back({p.slots[i], i, i, -1, 0});
    runs.back().end = i + 1;
  }
  for (SlotRun& r : runs) add_remap(b, p.begin + r.end - 1, r);
}

// The remap of a run whose last row is batch row `last`: the physical positions
// of its path's nodes from the first whose logical and physical positions
// differ (below it they agree: the slot's chain) to `last`. None when they
// agree all along. The path may reach into earlier passes, whose K/V is cached.
void Transformer::add_remap(const ForwardBatch& b, int last, SlotRun& run) {
  int from = b.positions[last] + 1;
  for (int i = last; i >= 0 && b.kv_position(i) != b.positions[i]; i = b.parent(i))
    from = b.positions[i];
  if (from > b.positions[last]) return;
  auto& remap = state_.remap;
  run.remap_begin = static_cast<int>(remap.size());
  run.remap_from = from;
  remap.resize(remap.size() + (b.positions[last] - from + 1));
  for (int i = last; i >= 0 && b.kv_position(i) != b.positions[i]; i = b.parent(i))
    remap[run.remap_begin + b.positions[i] - from] = b.kv_position(i);
}

// The pass's rows of the residual stream (token embeddings), and the rotation of
// each position, shared by every layer.
void Transformer::embed(const PassRows& p) {
  const int d = c_.d_model, half = c_.head_dim / 2;
  for (int i = 0; i < p.n; ++i) {
    kernels::get_row(model_.weights().tok_embd, p.tokens[i], &state_.x[size_t(i) * d]);
    kernels::rope_angles(p.positions[i], inv_freq_.data(), half, &state_.rope_cos[size_t(i) * half],
                         &state_.rope_sin[size_t(i) * half]);
  }
}

// x += attention(rmsnorm(x)) Wo, each row attending to its slot's cache.
void Transformer::attention_block(int l, const PassRows& p, KVCache& cache) {
  const auto& L = model_.weights().layers[l];
  ForwardState& s = state_;
  normalize(layer_f32_[l].attn_norm, p.n);
  {  // Q, K and V in one parallel region, the input quantized once.
    const TensorView* w[] = {&L.wq, &L.wk, &L.wv};
    float* y[] = {s.q.data(), s.k.data(), s.v.data()};
    kernels_->matmul_multi(w, 3, s.xn.data(), p.n, y);
  }
  rotate_and_cache(l, p, cache);
  const size_t q_dim = size_t(c_.n_heads) * c_.head_dim;
  s.attention_calls.clear();
  for (const SlotRun& r : s.runs) {
    KVSeqView kv = cache.view(r.slot, l);
    if (r.remap_begin >= 0) {
      kv.remap = &s.remap[r.remap_begin];
      kv.remap_from = r.remap_from;
    }
    s.attention_calls.push_back({&s.q[r.begin * q_dim], r.end - r.begin, &p.positions[r.begin], kv,
                                 &s.attn[r.begin * q_dim]});
  }
  kernels_->attention_batch(s.attention_calls.data(), static_cast<int>(s.attention_calls.size()),
                            attention_shape_);
  kernels_->matmul(L.wo, s.attn.data(), p.n, s.out.data());
  add_block_output(p.n);
}

// Each row's Q, K and V biases (Qwen2), the rotation of Q and K, and K and V
// into the cache, where the attention reads them.
void Transformer::rotate_and_cache(int l, const PassRows& p, KVCache& cache) {
  const LayerF32& F = layer_f32_[l];
  ForwardState& s = state_;
  const int hd = c_.head_dim, half = hd / 2;
  const int q_dim = c_.n_heads * hd, kv_dim = c_.n_kv_heads * hd;
  for (int i = 0; i < p.n; ++i) {
    float* q = &s.q[size_t(i) * q_dim];
    float* k = &s.k[size_t(i) * kv_dim];
    float* v = &s.v[size_t(i) * kv_dim];
    if (!F.bq.empty()) {
      kernels_->add_inplace(q, F.bq.data(), q_dim);
      kernels_->add_inplace(k, F.bk.data(), kv_dim);
      kernels_->add_inplace(v, F.bv.data(), kv_dim);
    }
    const float* cos = &s.rope_cos[size_t(i) * half];
    const float* sin = &s.rope_sin[size_t(i) * half];
    kernels_->rope(q, c_.n_heads, hd, cos, sin, c_.rope_style);
    kernels_->rope(k, c_.n_kv_heads, hd, cos, sin, c_.rope_style);
    cache.store(p.slots[i], l, p.kv_positions[i], k, v);
  }
}

// x += (silu(rmsnorm(x) Wgate) * rmsnorm(x) Wup) Wdown (SwiGLU).
void Transformer::ffn_block(int l, int n) {
  const auto& L = model_.weights().layers[l];
  ForwardState& s = state_;
  normalize(layer_f32_[l].ffn_norm, n);
  {
    const TensorView* w[] = {&L.w_gate, &L.w_up};
    float* y[] = {s.gate.data(), s.up.data()};
    kernels_->matmul_multi(w, 2, s.xn.data(), n, y);
  }
  // The positions' gate, up and hidden rows are contiguous: one element-wise
  // pass over all of them, shared by the threads.
  kernels_->pool().parallel_for(
      int64_t{n} * c_.d_ff,
      [this](int64_t b0, int64_t b1, int) {
        kernels_->swiglu(&state_.gate[b0], &state_.up[b0], static_cast<int>(b1 - b0),
                         &state_.hidden[b0]);
      },
      64);
  kernels_->matmul(L.w_down, s.hidden.data(), n, s.out.data());
  add_block_output(n);
}

// Final norm and LM head for the batch's wanted rows that lie in this pass, each
// written at its place in the output order; consecutive ones share a matmul.
void Transformer::head(const ForwardBatch& b, const PassRows& p, float* logits) {
  const auto& rows = b.logit_rows;
  const int m = static_cast<int>(rows.size()), d = c_.d_model;
  auto in_pass = [&](int j) { return rows[j] >= p.begin && rows[j] < p.begin + p.n; };
  for (int j = 0; j < m;) {
    if (!in_pass(j)) {
      ++j;
      continue;
    }
    int count = 0;  // normalised rows in xn; a row may be wanted twice, so at most max_tokens
    for (; j + count < m && count < state_.max_tokens && in_pass(j + count); ++count)
      kernels_->rmsnorm(&state_.x[size_t(rows[j + count] - p.begin) * d], output_norm_.data(), d,
                        c_.norm_eps, &state_.xn[size_t(count) * d]);
    lm_head(count, logits + size_t(j) * vocab_size());
    j += count;
  }
}

// Logits of the first `rows` rows of xn: the whole vocabulary, or the output
// ranges (written in place, row stride vocab_size) and -infinity elsewhere.
void Transformer::lm_head(int rows, float* logits) {
  if (output_ranges_.empty())
    return kernels_->matmul(model_.weights().output, state_.xn.data(), rows, logits);
  const int V = vocab_size();
  std::fill(logits, logits + size_t(rows) * V, -std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < output_ranges_.size(); ++i)
    kernels_->matmul_strided(output_parts_[i], state_.xn.data(), rows,
                             logits + output_ranges_[i].first, V);
}

// xn = rmsnorm(x) * weights, rows [0, n).
void Transformer::normalize(const std::vector<float>& weights, int n) {
  const int d = c_.d_model;
  for (int i = 0; i < n; ++i)
    kernels_->rmsnorm(&state_.x[size_t(i) * d], weights.data(), d, c_.norm_eps,
                      &state_.xn[size_t(i) * d]);
}

// x += out, rows [0, n).
void Transformer::add_block_output(int n) {
  const int d = c_.d_model;
  for (int i = 0; i < n; ++i)
    kernels_->add_inplace(&state_.x[size_t(i) * d], &state_.out[size_t(i) * d], d);
}

void Transformer::restrict_output(std::vector<std::pair<int, int>> ranges) {
  check_output_ranges(ranges, vocab_size());
  output_ranges_ = std::move(ranges);
  output_parts_.clear();
  for (auto [b, e] : output_ranges_)
    output_parts_.push_back(kernels::row_range(model_.weights().output, b, e));
}

}  // namespace tandem
