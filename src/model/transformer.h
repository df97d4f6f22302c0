// The forward pass of a Llama-family decoder over a batch of tokens with
// explicit positions and cache slots. One code path serves prefill, single-token
// decode and the K+1-position verification of speculative decoding: each token
// appends its K/V at (slot, position) and attends causally to its slot's cache.
// A drafted tree is verified in one pass too: its nodes are written side by side
// and each attends to its own ancestors (ForwardBatch::add_tree). This is the
// CPU's ForwardPass (model/forward_pass.h): the K/V live in host memory.
#pragma once
#include <memory>
#include <vector>

#include "cache/kv_cache.h"
#include "core/aligned.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/forward_batch.h"
#include "model/forward_pass.h"
#include "model/forward_state.h"
#include "model/model.h"

namespace tandem {

class Transformer final : public ForwardPass {
 public:
  // Positions per pass unless the owner asks for more: the engine's default
  // prefill chunk, and room for verifying several requests' drafts at once.
  static constexpr int kDefaultMaxTokens = 512;

  // The model must outlive the transformer. Allocates everything a pass of up to
  // max_tokens positions needs, and chooses the kernels the model was loaded for
  // (Model::kernel_config).
  Transformer(const Model& model, ThreadPool& pool, int max_tokens = kDefaultMaxTokens);

  // Runs the batch through every layer, writing K/V into `cache` and advancing each
  // slot's length; writes batch.logit_rows.size() rows of vocab_size logits. A batch
  // of more than max_tokens positions runs in passes of max_tokens, with the same
  // results (a position's do not depend on the positions that share its pass).
  void forward(const ForwardBatch& batch, KVCache& cache, float* logits) override;

  const Model& model() const override { return model_; }
  int max_tokens() const override { return state_.max_tokens; }
  KVCacheShape cache_shape() const override;
  // A host cache (contiguous or paged, as configured: make_kv_cache).
  std::unique_ptr<KVCache> make_cache(const KVCacheConfig& config) override;
  const kernels::Kernels& kernels() const { return *kernels_; }
  kernels::Kernels& kernels() { return *kernels_; }

  // Compute logits only for token ids in these [begin, end) ranges; the others
  // get -infinity (their probability is zero). A draft model restricted to the
  // frequent part of a large vocabulary skips most of its LM head; its
  // distribution q is still exact for the tokens it can propose, so speculation
  // stays lossless. Empty: the whole vocabulary.
  void restrict_output(std::vector<std::pair<int, int>> ranges) override;

 private:
  // Rows [begin, begin + n) of a batch: the positions of one pass.
  struct PassRows {
    const int* tokens;
    const int* positions;     // logical
    const int* kv_positions;  // physical
    const int* slots;
    int begin, n;
  };

  void run_pass(const ForwardBatch& batch, const PassRows& p, KVCache& cache, float* logits);
  void find_runs(const ForwardBatch& batch, const PassRows& p);
  void add_remap(const ForwardBatch& batch, int last, SlotRun& run);
  void embed(const PassRows& p);
  void attention_block(int layer, const PassRows& p, KVCache& cache);
  void rotate_and_cache(int layer, const PassRows& p, KVCache& cache);
  void ffn_block(int layer, int n);
  void head(const ForwardBatch& batch, const PassRows& p, float* logits);
  void lm_head(int rows, float* logits);
  void normalize(const std::vector<float>& weights, int n);
  void add_block_output(int n);

  const Model& model_;
  const ModelConfig& c_;
  ForwardState state_;
  std::unique_ptr<kernels::Kernels> kernels_;  // with their scratch for the same passes
  kernels::AttentionShape attention_shape_;
  std::vector<float> inv_freq_;
  // Norm weights and biases as F32 (files may store them as F16/BF16).
  struct LayerF32 {
    std::vector<float> attn_norm, ffn_norm, bq, bk, bv;
  };
  std::vector<LayerF32> layer_f32_;
  std::vector<float> output_norm_;
  std::vector<std::pair<int, int>> output_ranges_;  // empty: all of the vocabulary
  std::vector<TensorView> output_parts_;            // the LM head's rows of each range
};

}  // namespace tandem
