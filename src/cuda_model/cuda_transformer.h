// The CUDA forward pass: the same model, batches, caches' host tables and
// results as the CPU's Transformer (model/transformer.h), computed by the
// kernels of src/cuda on device memory. Everything above the forward pass
// (engine, scheduler, speculative round, sampler, structured outputs) is
// shared: only the kernels and where the data lives differ.
//
// Memory: one device allocation laid out by cuda::plan_device_memory, made at
// construction: the weights (uploaded once, in the device layout), the
// activations of the largest pass, the attention's split-K scratch, a step's
// inputs, and the KV blocks of the cache configured in the spec (make_cache
// hands them out once, as a DeviceKVCache). Per pass, the host builds the rows'
// inputs (step_inputs.h), copies them in, runs the layers, and copies back only
// the wanted logits rows.
//
// CUDA graphs: a pass whose sequences and rows per sequence fit a graph bucket
// (cuda/graph_buckets.h: a decode step, a verify of K + 1 positions, batched)
// runs padded to the bucket, as a graph captured the first time that bucket is
// used and replayed after. Other passes (long prefill chunks) run eagerly.
// Batch invariance makes the padding harmless and the replay bit-identical to
// the eager run of the same rows.
//
// Declared in every build; defined only where the CUDA kernels are built
// (TANDEM_HAVE_CUDA): make one through cuda_forward_pass_factory
// (cuda_model/device_choice.h), which says why it cannot. Checked on an H100 by
// tests/cuda/cuda_forward_gpu_test.cpp (docs/cuda.md).
#pragma once
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cuda/attention_plan.h"
#include "cuda/cuda_kernels.h"
#include "cuda/device.h"
#include "cuda/graph.h"
#include "cuda/graph_buckets.h"
#include "cuda/memory_plan.h"
#include "cuda/stream.h"
#include "cuda/timeline.h"
#include "cuda_model/device_kv_cache.h"
#include "cuda_model/device_weights.h"
#include "cuda_model/step_inputs.h"
#include "model/forward_pass.h"

namespace tandem::cuda_model {

struct CudaOptions {
  bool graphs = true;  // false: every pass eager (the graph-equals-eager test, benchmarks)
  // The fused launches (cuda_kernels.h: qkv_rope_store, gate_up_swiglu,
  // gemm_pairs): 8 launches a layer instead of 15 to 18, the same bits. false:
  // each operation on its own (the fused-equals-unfused test, benchmarks).
  bool fused = true;
  // Which lanes read which weights in every matmul (cuda_kernels.h: GemvMapping):
  // Lanes (16-byte chunks, coalesced), the faster on the GPU, or Groups. Fused
  // and unfused launches give the same bits under either; the two mappings
  // differ by rounding.
  cuda::GemvMapping gemv = cuda::GemvMapping::Lanes;
  // Time every kind of kernel with CUDA events (profile()); every pass then
  // runs eagerly, as a graph replays as one.
  bool profile = false;
  size_t reserve_bytes = size_t{1} << 30;  // device memory left to the driver and the graphs
};

class CudaTransformer final : public ForwardPass {
 public:
  // Throws tandem::Error when the model's tensors are not all of types the
  // kernels read, or when the weights, buffers and the spec's KV cache do not
  // fit in the device's free memory.
  CudaTransformer(const Model& model, const ForwardPassSpec& spec, const CudaOptions& options);
  ~CudaTransformer() override;

  void forward(const ForwardBatch& batch, KVCache& cache, float* logits) override;
  const Model& model() const override { return model_; }
  int max_tokens() const override { return limits_.max_rows; }
  KVCacheShape cache_shape() const override;
  // The device cache of the spec's configuration (config must be it); once.
  std::unique_ptr<KVCache> make_cache(const KVCacheConfig& config) override;
  void restrict_output(std::vector<std::pair<int, int>> ranges) override;
  std::vector<PassProfileEntry> profile() const override;
  void clear_profile() override { profile_.clear(); }

  // Turns graph replay on or off (off: every pass eager).
  void set_graphs(bool on) { options_.graphs = on; }
  int graphs_captured() const { return static_cast<int>(graphs_.size()); }
  const cuda::MemoryPlan& memory_plan() const { return plan_; }

 private:
  // Offsets of a step's inputs in the inputs region (and its pinned host mirror).
  struct InputOffsets {
    size_t tokens, pos, kv_pos, seq, remap_from, remap, tables, cos, sin, total;
  };
  InputOffsets input_offsets() const;
  void carve(uint8_t* base);
  void run_pass(const ForwardBatch& b, int begin, int n, DeviceKVCache& cache, float* logits);
  // The graph bucket this pass fits, or none.
  bool fits_bucket(const ForwardBatch& b, int begin, int n, cuda::GraphBucket& bucket) const;
  void stage_inputs();
  // Every kernel of the layers and the final norm, for `rows` rows.
  void enqueue_layers(int rows, int max_keys, const DeviceKVCache& cache);
  void gemm_rows(const cuda::DeviceMatrix& w, const float* x, int rows, float* y, int64_t ldy);
  // The LM head over `rows` rows of `x`, into logits_ rows.
  void enqueue_head(const float* x, int rows);
  void run_graph(const cuda::GraphBucket& bucket, const DeviceKVCache& cache);
  void download_rows(const ForwardBatch& b, int begin, int n, bool all_rows, float* logits);
  // Starts a timed interval (CudaOptions::profile); nothing otherwise.
  void mark(const char* name) {
    if (timeline_) timeline_->mark(name);
  }

  const Model& model_;
  const ModelConfig& c_;
  ForwardPassSpec spec_;
  CudaOptions options_;
  DeviceWeights weights_;
  StepLimits limits_;
  int block_size_ = 16;
  int kv_blocks_ = 0;  // the cache's blocks (one more on the device: padding)
  bool prefix_sharing_ = false;
  bool cache_made_ = false;
  const DeviceKVCache* cache_ = nullptr;  // the one make_cache made
  cuda::MemoryPlan plan_;
  cuda::DeviceBuffer memory_;  // the one allocation
  cuda::StreamOwner stream_;
  std::unique_ptr<cuda::StreamTimeline> timeline_;  // with CudaOptions::profile
  std::map<std::string, cuda::IntervalTotal> profile_;
  cuda::GraphBuckets buckets_;
  std::map<std::pair<int, int>, cuda::CudaGraph> graphs_;  // by (batch, tokens)
  InputOffsets in_;
  cuda::PinnedBuffer host_inputs_, host_logits_;
  StepInputs step_;
  std::vector<float> inv_freq_;
  std::vector<std::pair<int, int>> output_ranges_;  // empty: all of the vocabulary
  std::vector<cuda::DeviceMatrix> output_parts_;
  // Device buffers (within memory_).
  float *x_ = nullptr, *xn_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr;
  float *attn_ = nullptr, *gate_ = nullptr, *up_ = nullptr, *hidden_ = nullptr, *out_ = nullptr;
  float *logits_ = nullptr, *scratch_ = nullptr;
  uint8_t* inputs_ = nullptr;
  uint8_t* kv_ = nullptr;
};

}  // namespace tandem::cuda_model
