// CpuKernels' construction (target and scratch, once) and the stateless entry
// points on the best target.
#include "kernels/cpu/cpu_kernels.h"

#include "core/error.h"
#include "kernels/cpu/attention_job.h"

namespace tandem::kernels::cpu {

CpuKernels::CpuKernels(const KernelConfig& config, ThreadPool& pool, const KernelLimits& limits)
    : Kernels(pool, limits),
      fn_(target_kernels(config.simd_target)),
      prefetch_bytes_(config.prefetch_bytes),
      prefetch_packed_bytes_(config.prefetch_packed_bytes),
      non_temporal_(non_temporal_streams(config.stream_prefetch, this_cpu())),
      workers_(pool.size()) {
  q8_.reserve(limits.max_rows, limits.max_k, 32);
  q8k_.reserve(limits.max_rows, limits.max_k, 256);
  for (auto& w : workers_)
    w.reserve(limits.max_k, limits.head_dim, limits.max_group, kKeyBlock, kAttentionTile);
  // A pass of max_rows rows attends in at most max_rows calls.
  batch_jobs_.reserve(limits.max_rows);
  batch_first_.reserve(limits.max_rows + 1);
}

void CpuKernels::rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                      RopeStyle style) {
  check(head_dim % 2 == 0, "rope: head_dim {} must be even", head_dim);
  fn_.rope(x, n_heads, head_dim, cos, sin, style);
}

int argmax(const float* x, int n) { return best_target_kernels().argmax(x, n); }
float sum_exp(const float* x, int n, float shift, float scale) {
  return best_target_kernels().sum_exp(x, n, shift, scale);
}

const char* simd_target_name() { return best_target_kernels().name; }

}  // namespace tandem::kernels::cpu
