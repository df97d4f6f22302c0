// The CUDA forward pass (cuda_transformer.h). Built only with the CUDA kernels.
// What it promises of its results is checked on a device by
// tests/cuda/cuda_forward_gpu_test.cpp.
#if defined(TANDEM_HAVE_CUDA)
#include "cuda_model/cuda_transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "model/output_ranges.h"

namespace tandem::cuda_model {
namespace {

// The most positions per sequence a graph bucket holds: a verify pass of the
// longest draft (speculative/draft_policy.h: kMaxDraft = 32, plus one).
constexpr int kMaxGraphTokens = 33;

size_t align_up(size_t x) {
  return (x + cuda::kRegionAlign - 1) / cuda::kRegionAlign * cuda::kRegionAlign;
}

// The paged cache a KV configuration asks for, in blocks: the device cache is
// always paged (the kernels read block tables). A paged configuration gets its
// positions as the CPU's paged cache does; a contiguous one promises every slot
// its n_ctx positions at once, so each slot's are rounded up to whole blocks of
// 16 (without prefix sharing, as the CPU's contiguous cache has none).
int block_size_of(const KVCacheConfig& kv) {
  return kv.kind == KVCacheConfig::Kind::Paged ? kv.block_size : 16;
}
int64_t blocks_of(const KVCacheConfig& kv) {
  const int64_t bs = block_size_of(kv);
  if (kv.kind == KVCacheConfig::Kind::Contiguous)
    return int64_t{kv.n_slots} * ((int64_t{kv.n_ctx} + bs - 1) / bs);
  const int64_t positions = kv.n_positions > 0 ? kv.n_positions : int64_t{kv.n_slots} * kv.n_ctx;
  return (positions + bs - 1) / bs;
}

cuda::ModelDims dims_of(const ModelConfig& c) {
  return {c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff, c.vocab_size};
}

StepLimits step_limits(const ModelConfig& c, const ForwardPassSpec& spec) {
  check(spec.max_tokens >= 1, "CUDA forward: max_tokens must be >= 1, got {}", spec.max_tokens);
  StepLimits l;
  l.max_rows = spec.max_tokens;
  l.max_seqs = std::max(1, std::min(spec.max_tokens, spec.kv.n_slots));
  // A sequence's positions: its context, and room for a verify's drafts past
  // it (the table refuses more rather than write out of bounds).
  const int n_ctx = std::max(1, std::min(spec.kv.n_ctx, c.context_length)) + kMaxGraphTokens;
  l.table_stride = (n_ctx + block_size_of(spec.kv) - 1) / block_size_of(spec.kv);
  l.max_remap = spec.max_tokens;
  l.rope_half = c.head_dim / 2;
  return l;
}

cuda::GraphBucketLimits bucket_limits(const StepLimits& l) {
  cuda::GraphBucketLimits b;
  b.max_batch = l.max_seqs;
  b.max_tokens = std::max(1, std::min(kMaxGraphTokens, l.max_rows / l.max_seqs));
  return b;
}

}  // namespace

CudaTransformer::CudaTransformer(const Model& model, const ForwardPassSpec& spec,
                                 const CudaOptions& options)
    : model_(model),
      c_(model.config()),
      spec_(spec),
      options_(options),
      weights_(model),
      limits_(step_limits(c_, spec)),
      block_size_(block_size_of(spec.kv)),
      prefix_sharing_(spec.kv.kind == KVCacheConfig::Kind::Paged),
      buckets_(bucket_limits(limits_)),
      inv_freq_(rope_inv_freq(c_)) {
  if (options_.profile) {
    options_.graphs = false;  // a graph replays as one interval
    timeline_ = std::make_unique<cuda::StreamTimeline>(stream_.get());
  }
  check(c_.head_dim <= cuda::kMaxHeadDim && c_.head_dim % 2 == 0,
        "--device cuda: head_dim {} (the kernels take even head sizes up to {})", c_.head_dim,
        cuda::kMaxHeadDim);
  const int64_t blocks = blocks_of(spec.kv);
  check(blocks >= 1 && blocks < std::numeric_limits<int>::max(),
        "--device cuda: a KV cache of {} blocks", blocks);
  kv_blocks_ = static_cast<int>(blocks);
  in_ = input_offsets();

  cuda::MemoryPlanRequest r;
  const cuda::DeviceProperties props = cuda::device_properties();
  r.device_bytes = props.free_bytes;
  r.reserve_bytes = std::min(options.reserve_bytes, props.free_bytes / 4);
  r.weight_bytes = weights_.bytes();
  r.dims = dims_of(c_);
  r.kv_type = spec.kv.type;
  r.kv_block_size = block_size_;
  r.max_rows = limits_.max_rows;
  r.max_context = limits_.table_stride * block_size_;
  r.input_bytes = in_.total;
  plan_ = cuda::plan_device_memory(r);
  // The plan fills the device with blocks; the allocation takes only the
  // configured ones, plus the padding block, so that a draft model's pass and
  // the target's share the device.
  check(plan_.kv_blocks >= kv_blocks_ + 1,
        "--device cuda: a KV cache of {} positions does not fit in the {} MiB free on {} (room "
        "for {} positions)",
        int64_t{kv_blocks_} * block_size_, props.free_bytes >> 20, props.name,
        int64_t{plan_.kv_blocks - 1} * block_size_);
  plan_.kv_blocks = kv_blocks_ + 1;
  plan_.kv_cache.bytes = size_t(plan_.kv_blocks) * plan_.kv_block_bytes;
  plan_.total_bytes = plan_.kv_cache.end();
  memory_ = cuda::DeviceBuffer(plan_.total_bytes);
  carve(memory_.as<uint8_t>());
  weights_.upload(memory_.as<uint8_t>() + plan_.weights.offset);
  host_inputs_ = cuda::PinnedBuffer(in_.total);
  host_logits_ = cuda::PinnedBuffer(sizeof(float) * size_t(limits_.max_rows) * c_.vocab_size);
}

CudaTransformer::~CudaTransformer() = default;

KVCacheShape CudaTransformer::cache_shape() const {
  return {c_.n_layers, c_.n_kv_heads, c_.head_dim};
}

CudaTransformer::InputOffsets CudaTransformer::input_offsets() const {
  const size_t rows = size_t(limits_.max_rows);
  InputOffsets o{};
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t start = at;
    at = align_up(at + bytes);
    return start;
  };
  o.tokens = take(sizeof(int) * rows);
  o.pos = take(sizeof(int) * rows);
  o.kv_pos = take(sizeof(int) * rows);
  o.seq = take(sizeof(int) * rows);
  o.remap_from = take(sizeof(int) * rows);
  o.remap = take(sizeof(int) * rows * size_t(limits_.max_remap));
  o.tables = take(sizeof(int) * size_t(limits_.max_seqs + 1) * size_t(limits_.table_stride));
  o.cos = take(sizeof(float) * rows * size_t(limits_.rope_half));
  o.sin = take(sizeof(float) * rows * size_t(limits_.rope_half));
  o.total = at;
  return o;
}

// The activations region, row-major buffers of max_rows rows each, in the
// order of activation_floats_per_row; then the scratch, inputs and KV regions.
void CudaTransformer::carve(uint8_t* base) {
  float* a = reinterpret_cast<float*>(base + plan_.activations.offset);
  const size_t rows = size_t(limits_.max_rows);
  const size_t d = c_.d_model, q = size_t(c_.n_heads) * c_.head_dim;
  const size_t kv = size_t(c_.n_kv_heads) * c_.head_dim, ff = c_.d_ff;
  auto take = [&](size_t per_row) {
    float* p = a;
    a += per_row * rows;
    return p;
  };
  x_ = take(d);
  xn_ = take(d);
  out_ = take(d);
  q_ = take(q);
  attn_ = take(q);
  k_ = take(kv);
  v_ = take(kv);
  gate_ = take(ff);
  up_ = take(ff);
  hidden_ = take(ff);
  logits_ = take(size_t(c_.vocab_size));
  scratch_ = reinterpret_cast<float*>(base + plan_.attention_scratch.offset);
  inputs_ = base + plan_.inputs.offset;
  kv_ = base + plan_.kv_cache.offset;
}

std::unique_ptr<KVCache> CudaTransformer::make_cache(const KVCacheConfig& config) {
  check(!cache_made_, "CUDA forward: make_cache: the device KV region is already handed out");
  check(blocks_of(config) == kv_blocks_ && block_size_of(config) == block_size_ &&
            config.type == spec_.kv.type && config.n_slots == spec_.kv.n_slots,
        "CUDA forward: make_cache: the configuration differs from the one the device memory "
        "was planned for");
  cache_made_ = true;
  auto cache =
      std::make_unique<DeviceKVCache>(cache_shape(), config.n_slots, kv_blocks_, block_size_,
                                      config.type, kv_, stream_.get(), prefix_sharing_);
  cache_ = cache.get();
  return cache;
}

void CudaTransformer::restrict_output(std::vector<std::pair<int, int>> ranges) {
  check_output_ranges(ranges, vocab_size());
  output_ranges_ = std::move(ranges);
  output_parts_.clear();
  for (auto [b, e] : output_ranges_) output_parts_.push_back(matrix_rows(weights_.output(), b, e));
  graphs_.clear();  // their LM head was captured for the old ranges
}

void CudaTransformer::forward(const ForwardBatch& b, KVCache& cache_base, float* logits) {
  auto* cache = dynamic_cast<DeviceKVCache*>(&cache_base);
  check(cache != nullptr && cache == cache_,
        "CUDA forward: the cache is not the one this pass made (make_cache)");
  validate_forward_batch(b, *cache, c_);
  reserve_forward_batch(b, *cache);
  for (int begin = 0; begin < b.size(); begin += limits_.max_rows)
    run_pass(b, begin, std::min(limits_.max_rows, b.size() - begin), *cache, logits);
  advance_forward_batch(b, *cache);
}

// One pass: inputs in, the layers (a graph's replay or eager launches), the
// wanted logits rows out.
void CudaTransformer::run_pass(const ForwardBatch& b, int begin, int n, DeviceKVCache& cache,
                               float* logits) {
  const TableOf table_of = [&cache](int slot) -> const std::vector<int>& {
    return cache.block_table(slot);
  };
  cuda::GraphBucket bucket;
  const bool graph = options_.graphs && fits_bucket(b, begin, n, bucket);
  build_step_inputs(b, begin, n, graph ? bucket.rows() : n, graph ? bucket.tokens : 0, limits_,
                    table_of, cache.pad_block(), inv_freq_, step_);
  mark("inputs to the device");
  stage_inputs();
  if (graph) {
    run_graph(bucket, cache);
  } else {
    enqueue_layers(n, step_.max_keys, cache);
  }
  download_rows(b, begin, n, graph, logits);
  if (timeline_) timeline_->collect(profile_);
}

std::vector<PassProfileEntry> CudaTransformer::profile() const {
  std::vector<PassProfileEntry> out;
  for (const auto& [name, t] : profile_) out.push_back({name, t.ms, t.count});
  return out;
}

// A pass fits a bucket when its sequences and its rows per sequence do.
bool CudaTransformer::fits_bucket(const ForwardBatch& b, int begin, int n,
                                  cuda::GraphBucket& bucket) const {
  int seqs = 0, longest = 0, run = 0;
  for (int i = begin; i < begin + n; ++i) {
    if (i == begin || b.slots[i] != b.slots[i - 1]) {
      ++seqs;
      run = 0;
    }
    longest = std::max(longest, ++run);
  }
  if (seqs > buckets_.batch_sizes().back() || longest > buckets_.token_counts().back())
    return false;
  bucket = buckets_.choose(seqs, longest);
  return bucket.rows() <= limits_.max_rows && bucket.batch <= limits_.max_seqs;
}

// The step's inputs into the pinned mirror, then each array's used part to the
// device (queued; the pass's launches follow on the same stream).
void CudaTransformer::stage_inputs() {
  uint8_t* host = host_inputs_.as<uint8_t>();
  cuda::Stream s = stream_.get();
  auto put = [&](size_t offset, const void* src, size_t bytes) {
    std::memcpy(host + offset, src, bytes);
    cuda::copy_to_device(inputs_ + offset, host + offset, bytes, s);
  };
  const size_t rows = size_t(step_.padded_rows);
  put(in_.tokens, step_.tokens.data(), sizeof(int) * rows);
  put(in_.pos, step_.pos.data(), sizeof(int) * rows);
  put(in_.kv_pos, step_.kv_pos.data(), sizeof(int) * rows);
  put(in_.seq, step_.seq.data(), sizeof(int) * rows);
  put(in_.remap_from, step_.remap_from.data(), sizeof(int) * rows);
  put(in_.remap, step_.remap.data(), sizeof(int) * step_.remap.size());
  put(in_.tables, step_.tables.data(), sizeof(int) * step_.tables.size());
  put(in_.cos, step_.cos.data(), sizeof(float) * step_.cos.size());
  put(in_.sin, step_.sin.data(), sizeof(float) * step_.sin.size());
}

void CudaTransformer::gemm_rows(const cuda::DeviceMatrix& w, const float* x, int rows, float* y,
                                int64_t ldy) {
  // The gemm takes at most kMaxGemmRows rows; each row's result is the same in any tile.
  if (options_.fused) return cuda::gemm_pairs(w, x, rows, y, ldy, stream_.get(), options_.gemv);
  for (int m = 0; m < rows; m += cuda::kMaxGemmRows)
    cuda::gemm(w, x + int64_t{m} * w.layout.k, std::min(cuda::kMaxGemmRows, rows - m),
               y + int64_t{m} * ldy, ldy, stream_.get(), options_.gemv);
}

// The CPU pass's blocks, in its order: x += attention(rmsnorm(x)) Wo, then
// x += ffn(rmsnorm(x)); each residual add fused with the next norm.
void CudaTransformer::enqueue_layers(int rows, int max_keys, const DeviceKVCache& cache) {
  cuda::Stream s = stream_.get();
  const int d = c_.d_model, hd = c_.head_dim;
  const int q_dim = c_.n_heads * hd, kv_dim = c_.n_kv_heads * hd;
  const float eps = c_.norm_eps;
  const int* tokens = reinterpret_cast<const int*>(inputs_ + in_.tokens);
  const int* pos = reinterpret_cast<const int*>(inputs_ + in_.pos);
  const int* kv_pos = reinterpret_cast<const int*>(inputs_ + in_.kv_pos);
  const int* seq = reinterpret_cast<const int*>(inputs_ + in_.seq);
  const int* remap_from = reinterpret_cast<const int*>(inputs_ + in_.remap_from);
  const int* remap = reinterpret_cast<const int*>(inputs_ + in_.remap);
  const int* tables = reinterpret_cast<const int*>(inputs_ + in_.tables);
  const float* cos = reinterpret_cast<const float*>(inputs_ + in_.cos);
  const float* sin = reinterpret_cast<const float*>(inputs_ + in_.sin);
  const cuda::AttentionDims dims{c_.n_heads, c_.n_kv_heads, hd,
                                 1.0f / std::sqrt(static_cast<float>(hd))};

  mark("embedding");
  cuda::get_rows(weights_.tok_embd(), tokens, rows, x_, s);
  for (int l = 0; l < c_.n_layers; ++l) {
    const DeviceLayer& L = weights_.layer(l);
    mark("rmsnorm");
    if (l == 0)
      cuda::rmsnorm(x_, L.attn_norm, rows, d, eps, xn_, s);
    else
      cuda::add_rmsnorm(x_, out_, L.attn_norm, rows, d, eps, xn_, s);
    const cuda::PagedKV kv = cache.layer(l);
    if (options_.fused) {
      mark("qkv_rope_store");
      cuda::QkvStep q;
      q.wq = &L.wq;
      q.wk = &L.wk;
      q.wv = &L.wv;
      q.bq = L.bq;
      q.bk = L.bk;
      q.bv = L.bv;
      q.n_heads = c_.n_heads;
      q.n_kv_heads = c_.n_kv_heads;
      q.head_dim = hd;
      q.style = c_.rope_style;
      q.cos = cos;
      q.sin = sin;
      q.seq = seq;
      q.kv_pos = kv_pos;
      q.block_tables = tables;
      q.table_stride = limits_.table_stride;
      cuda::qkv_rope_store(q, kv, xn_, rows, q_, s, options_.gemv);
    } else {
      mark("gemm q, k, v");
      gemm_rows(L.wq, xn_, rows, q_, q_dim);
      gemm_rows(L.wk, xn_, rows, k_, kv_dim);
      gemm_rows(L.wv, xn_, rows, v_, kv_dim);
      mark("add_rows, rope, kv_store");
      if (L.bq) {
        cuda::add_rows(q_, L.bq, rows, q_dim, s);
        cuda::add_rows(k_, L.bk, rows, kv_dim, s);
        cuda::add_rows(v_, L.bv, rows, kv_dim, s);
      }
      cuda::rope(q_, rows, q_dim, c_.n_heads, hd, cos, sin, c_.rope_style, s);
      cuda::rope(k_, rows, kv_dim, c_.n_kv_heads, hd, cos, sin, c_.rope_style, s);
      cuda::kv_store(k_, v_, rows, kv_dim, seq, kv_pos, tables, limits_.table_stride, kv, s);
    }
    cuda::AttentionArgs a;
    a.q = q_;
    a.out = attn_;
    a.rows = rows;
    a.seq = seq;
    a.pos = pos;
    a.block_tables = tables;
    a.table_stride = limits_.table_stride;
    a.max_keys = max_keys;
    a.scratch = scratch_;
    a.remap = remap;
    a.remap_from = remap_from;
    a.remap_stride = step_.remap_stride;
    mark("attention");
    cuda::paged_attention(a, kv, dims, s);
    mark("gemm wo");
    gemm_rows(L.wo, attn_, rows, out_, d);
    mark("rmsnorm");
    cuda::add_rmsnorm(x_, out_, L.ffn_norm, rows, d, eps, xn_, s);
    if (options_.fused) {
      mark("gate_up_swiglu");
      cuda::gate_up_swiglu(L.w_gate, L.w_up, xn_, rows, hidden_, s, options_.gemv);
    } else {
      mark("gemm gate, up; swiglu");
      gemm_rows(L.w_gate, xn_, rows, gate_, c_.d_ff);
      gemm_rows(L.w_up, xn_, rows, up_, c_.d_ff);
      cuda::swiglu(gate_, up_, int64_t{rows} * c_.d_ff, hidden_, s);
    }
    mark("gemm down");
    gemm_rows(L.w_down, hidden_, rows, out_, d);
  }
  mark("rmsnorm");
  cuda::add_rmsnorm(x_, out_, weights_.output_norm(), rows, d, eps, xn_, s);
}

// Logits rows (row stride vocab_size): the whole vocabulary, or only the
// output ranges' columns (the others are set to -infinity on the host).
void CudaTransformer::enqueue_head(const float* x, int rows) {
  const int V = vocab_size();
  if (output_ranges_.empty()) return gemm_rows(weights_.output(), x, rows, logits_, V);
  for (size_t i = 0; i < output_ranges_.size(); ++i)
    gemm_rows(output_parts_[i], x, rows, logits_ + output_ranges_[i].first, V);
}

// A graph per bucket, captured the first time the bucket runs: the layers and
// the LM head of every row, padding included, with attention sized for the
// longest context (a row's chunks past its own position exit at once).
void CudaTransformer::run_graph(const cuda::GraphBucket& bucket, const DeviceKVCache& cache) {
  const std::pair<int, int> key{bucket.batch, bucket.tokens};
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    cuda::CudaGraph g;
    stream_.synchronize();  // the staged inputs are copied before the capture starts
    const int rows = bucket.rows(), max_keys = limits_.table_stride * block_size_;
    try {
      g.capture(stream_.get(), [&] {
        enqueue_layers(rows, max_keys, cache);
        enqueue_head(xn_, rows);
      });
    } catch (const Error& e) {
      // A capture the driver refuses: run eagerly from now on rather than fail requests.
      std::fprintf(stderr, "warning: CUDA graph capture failed (%s); running without graphs\n",
                   e.what());
      options_.graphs = false;
      enqueue_layers(step_.rows, step_.max_keys, cache);
      enqueue_head(xn_, step_.rows);
      return;
    }
    it = graphs_.emplace(key, std::move(g)).first;
  }
  it->second.launch(stream_.get());
}

// The pass's wanted rows to the host. A graph computed the LM head of every
// row; an eager pass first gathers the wanted rows of xn and computes only
// theirs. Either way a row's logits are the same bits (batch invariance).
void CudaTransformer::download_rows(const ForwardBatch& b, int begin, int n, bool all_rows,
                                    float* logits) {
  const size_t V = size_t(vocab_size());
  cuda::Stream s = stream_.get();
  std::vector<int> wanted;  // output index j of each of this pass's wanted rows
  for (int j = 0; j < static_cast<int>(b.logit_rows.size()); ++j)
    if (b.logit_rows[j] >= begin && b.logit_rows[j] < begin + n) wanted.push_back(j);
  // Rows are gathered and downloaded in chunks of max_rows (a row may be wanted twice).
  float* host = host_logits_.as<float>();
  for (size_t c = 0; c < wanted.size(); c += size_t(limits_.max_rows)) {
    const int m = static_cast<int>(std::min(wanted.size() - c, size_t(limits_.max_rows)));
    mark(all_rows ? "logits to the host" : "gather rows");
    for (int i = 0; i < m; ++i) {
      const int row = b.logit_rows[wanted[c + i]] - begin;
      if (all_rows) {
        cuda::copy_to_host(host + size_t(i) * V, logits_ + size_t(row) * V, sizeof(float) * V, s);
      } else {
        cuda::copy_on_device(out_ + size_t(i) * c_.d_model, xn_ + size_t(row) * c_.d_model,
                             sizeof(float) * c_.d_model, s);
      }
    }
    if (!all_rows) {
      mark("lm head");
      enqueue_head(out_, m);
      mark("logits to the host");
      cuda::copy_to_host(host, logits_, sizeof(float) * V * m, s);
    }
    stream_.synchronize();
    for (int i = 0; i < m; ++i) {
      float* dst = logits + size_t(wanted[c + i]) * V;
      const float* src = host + size_t(i) * V;
      if (output_ranges_.empty()) {
        std::memcpy(dst, src, sizeof(float) * V);
        continue;
      }
      // -infinity outside the ranges, as the CPU pass writes.
      std::fill(dst, dst + V, -std::numeric_limits<float>::infinity());
      for (auto [rb, re] : output_ranges_) std::copy(src + rb, src + re, dst + rb);
    }
  }
}

}  // namespace tandem::cuda_model
#endif
