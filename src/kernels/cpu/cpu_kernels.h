// The SIMD CPU implementation of kernels.h (see there for the contracts). The
// instruction set is chosen once, when a CpuKernels object is made, and its
// entry points are called through a table (target_kernels.h); the scratch of
// every call is the object's own (worker_scratch.h), sized at construction.
#pragma once
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/attention_job.h"
#include "kernels/cpu/target_kernels.h"
#include "kernels/cpu/worker_scratch.h"
#include "kernels/kernels.h"

namespace tandem::kernels::cpu {

class CpuKernels final : public Kernels {
 public:
  CpuKernels(const KernelConfig& config, ThreadPool& pool, const KernelLimits& limits);

  const char* name() const override { return fn_.name; }
  void rmsnorm(const float* x, const float* w, int n, float eps, float* out) override {
    fn_.rmsnorm(x, w, n, eps, out);
  }
  void swiglu(const float* gate, const float* up, int n, float* out) override {
    fn_.swiglu(gate, up, n, out);
  }
  void add_inplace(float* x, const float* b, int n) override { fn_.add_inplace(x, b, n); }
  void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
            RopeStyle style) override;

 protected:
  void matmul_rows(const TensorView* const* Ws, int count, const float* x, int M, float* const* ys,
                   int64_t ldy) override;  // matmul_cpu.cpp
  void attend_batch(const AttentionCall* calls, int n_calls,
                    const AttentionShape& shape) override;  // attention_cpu.cpp

 private:
  TargetKernels fn_;
  int64_t prefetch_bytes_, prefetch_packed_bytes_;  // KernelConfig's
  bool non_temporal_;  // KernelConfig::stream_prefetch, resolved for this CPU
  QActs q8_, q8k_;     // (max_rows, max_k) a matmul's input, quantized per 32 and per 256
  std::vector<WorkerScratch> workers_;  // (pool threads) indexed by thread
  // attend_batch's jobs, and the index of each call's first (KV head, tile) pair
  // among all of the calls' pairs, then their count (grown as needed; one call
  // at a time).
  std::vector<AttentionJob> batch_jobs_;
  std::vector<int64_t> batch_first_;
};

// Stateless entry points on this CPU's best target (best_target_kernels):
int argmax(const float* x, int n);
float sum_exp(const float* x, int n, float shift, float scale);
// The instruction set the best target is, e.g. "AVX3_DL".
const char* simd_target_name();

// Quantize M rows of K floats with one scale per `block` elements (32 or 256; K
// a multiple of it) with `fn`'s kernels. `out` grows to fit unless its capacity
// suffices (QActs::reserve).
void quantize_acts(const TargetKernels& fn, const float* x, int M, int64_t K, int block,
                   QActs& out);

}  // namespace tandem::kernels::cpu
