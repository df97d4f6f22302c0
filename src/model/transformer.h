// The forward pass of a Llama-family decoder over a batch of tokens with
// explicit positions and cache slots. One code path serves prefill, single-token
// decode and the K+1-position verification of speculative decoding: each token
// appends its K/V at (slot, position) and attends causally to its slot's cache.
// A drafted tree is verified in one pass too: its nodes are written side by side
// and each attends to its own ancestors (ForwardBatch::add_tree).
#pragma once
#include <memory>
#include <vector>

#include "cache/kv_cache.h"
#include "core/aligned.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "model/forward_state.h"
#include "model/model.h"

namespace tandem {

// Tokens of one slot are consecutive. Each has a logical position (its RoPE
// angle and causal extent) and a physical one (where its K/V is written); they
// differ only for the nodes of a drafted tree, which lie side by side in the
// cache. Physical positions continue the slot's cache.
struct ForwardBatch {
  std::vector<int> tokens;
  std::vector<int> positions;  // logical
  std::vector<int> slots;
  std::vector<int> logit_rows;  // indices into tokens whose logits are wanted, in output order
  // Per token: the batch index of its parent in a drafted tree, or -1 when it
  // follows the previous position of its slot (every token added by
  // add_sequence). Empty when the batch holds no tree.
  std::vector<int> parents;
  // Per token: its physical position. Empty when the batch holds no tree (then
  // equal to positions).
  std::vector<int> kv_positions;

  void clear() {
    tokens.clear();
    positions.clear();
    slots.clear();
    logit_rows.clear();
    parents.clear();
    kv_positions.clear();
  }
  // Room for n tokens in every list: a batch reused pass after pass (cleared,
  // then filled) then allocates nothing up to n.
  void reserve(int n) {
    for (auto* v : {&tokens, &positions, &slots, &logit_rows, &parents, &kv_positions})
      v->reserve(static_cast<size_t>(n));
  }
  // Append n tokens of one sequence at positions start.., optionally all wanting logits.
  void add_sequence(int slot, const int* ids, int n, int start, bool all_logits, bool last_logits);
  // Append a tree of n tokens of one sequence: parent[j] is the index (within
  // these n, < j) of token j's parent, or -1 for a child of the token at
  // position start - 1 (the slot's last cached or earlier-added position). Token j
  // is rotated and attends as position start + depth(j) (its logical position) and
  // its K/V is written at cache position start + j (its physical position).
  // With all_logits every token's logits are wanted. Throws tandem::Error for a
  // parent index outside [-1, j).
  void add_tree(int slot, const int* ids, const int* parent, int n, int start, bool all_logits);
  int size() const { return static_cast<int>(tokens.size()); }
  int parent(int i) const { return parents.empty() ? -1 : parents[i]; }
  int kv_position(int i) const { return kv_positions.empty() ? positions[i] : kv_positions[i]; }
};

class Transformer {
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
  void forward(const ForwardBatch& batch, KVCache& cache, float* logits);

  const Model& model() const { return model_; }
  int vocab_size() const { return model_.config().vocab_size; }
  int max_tokens() const { return state_.max_tokens; }
  KVCacheShape cache_shape() const;
  const kernels::Kernels& kernels() const { return *kernels_; }
  kernels::Kernels& kernels() { return *kernels_; }

  // Compute logits only for token ids in these [begin, end) ranges; the others
  // get -infinity (their probability is zero). A draft model restricted to the
  // frequent part of a large vocabulary skips most of its LM head; its
  // distribution q is still exact for the tokens it can propose, so speculation
  // stays lossless. Empty: the whole vocabulary.
  void restrict_output(std::vector<std::pair<int, int>> ranges);

 private:
  // Rows [begin, begin + n) of a batch: the positions of one pass.
  struct PassRows {
    const int* tokens;
    const int* positions;     // logical
    const int* kv_positions;  // physical
    const int* slots;
    int begin, n;
  };

  void validate(const ForwardBatch& batch, KVCache& cache) const;
  void validate_logical(const ForwardBatch& batch, int i, int run_begin, int chain_end) const;
  void reserve_cache(const ForwardBatch& batch, KVCache& cache) const;
  void advance_cache(const ForwardBatch& batch, KVCache& cache) const;
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
