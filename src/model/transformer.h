// The forward pass of a Llama-family decoder over a batch of tokens with
// explicit positions and cache slots. One code path serves prefill, single-token
// decode and the K+1-position verification of speculative decoding: each token
// appends its K/V at (slot, position) and attends causally to its slot's cache.
#pragma once
#include <vector>

#include "cache/kv_cache.h"
#include "core/aligned.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace tandem {

struct ForwardBatch {
  std::vector<int> tokens;
  std::vector<int> positions;  // tokens of one slot are consecutive and continue its cache
  std::vector<int> slots;
  std::vector<int> logit_rows;  // indices into tokens whose logits are wanted, in output order

  void clear() { tokens.clear(); positions.clear(); slots.clear(); logit_rows.clear(); }
  // Append n tokens of one sequence at positions start.., optionally all wanting logits.
  void add_sequence(int slot, const int* ids, int n, int start, bool all_logits, bool last_logits);
  int size() const { return static_cast<int>(tokens.size()); }
};

class Transformer {
 public:
  // The model must outlive the transformer. Scratch buffers grow with the largest batch seen.
  Transformer(const Model& model, ThreadPool& pool);

  // Runs the batch through every layer, writing K/V into `cache` and advancing each
  // slot's length; writes batch.logit_rows.size() rows of vocab_size logits.
  void forward(const ForwardBatch& batch, KVCache& cache, float* logits);

  const Model& model() const { return model_; }
  int vocab_size() const { return model_.config().vocab_size; }
  KVCacheShape cache_shape() const;

  // Compute logits only for token ids in these [begin, end) ranges; the others
  // get -infinity (their probability is zero). A draft model restricted to the
  // frequent part of a large vocabulary skips most of its LM head; its
  // distribution q is still exact for the tokens it can propose, so speculation
  // stays lossless. Empty: the whole vocabulary.
  void restrict_output(std::vector<std::pair<int, int>> ranges);

 private:
  void ensure_scratch(int n_tokens);
  void validate(const ForwardBatch& batch, KVCache& cache) const;

  const Model& model_;
  const ModelConfig& c_;
  ThreadPool& pool_;
  std::vector<float> inv_freq_;
  std::vector<float> rope_cos_, rope_sin_;  // per position of the batch: rope_angles
  // Norm weights and biases as F32 (files may store them as F16/BF16).
  struct LayerF32 { std::vector<float> attn_norm, ffn_norm, bq, bk, bv; };
  std::vector<LayerF32> layer_f32_;
  std::vector<float> output_norm_;
  std::vector<std::pair<int, int>> output_ranges_;  // empty: all of the vocabulary
  AlignedVector<float> range_logits_;               // scratch for restricted outputs
  // Scratch, (n_tokens, width) row-major, cache-line aligned so that the
  // kernels' vector loads and stores of a row do not straddle two lines.
  int scratch_tokens_ = 0;
  AlignedVector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, hidden_, out_;
};

}  // namespace tandem
