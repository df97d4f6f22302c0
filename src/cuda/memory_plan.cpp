// The device memory plan: region sizes and the number of KV blocks.
#include "cuda/memory_plan.h"

#include "core/error.h"
#include "cuda/attention_plan.h"

namespace tandem::cuda {
namespace {

size_t align_up(size_t x) { return (x + kRegionAlign - 1) / kRegionAlign * kRegionAlign; }

// The region of `bytes` after `prev`, aligned.
MemoryRegion after(const MemoryRegion& prev, size_t bytes) {
  return {align_up(prev.end()), align_up(bytes)};
}

void check_dims(const MemoryPlanRequest& r) {
  const ModelDims& d = r.dims;
  if (d.n_layers < 1 || d.d_model < 1 || d.n_heads < 1 || d.n_kv_heads < 1 || d.head_dim < 1 ||
      d.d_ff < 1 || d.vocab < 1)
    fail("device memory plan: every model dimension must be at least 1");
  if (r.kv_type != DType::F16 && r.kv_type != DType::F32)
    fail("device memory plan: KV cache type {} (F16 or F32)", dtype_name(r.kv_type));
  if (r.kv_block_size < 1 || r.max_rows < 1 || r.max_context < 1)
    fail("device memory plan: block size, rows and context must be at least 1");
}

}  // namespace

int64_t activation_floats_per_row(const ModelDims& d) {
  const int64_t q = int64_t{d.n_heads} * d.head_dim, kv = int64_t{d.n_kv_heads} * d.head_dim;
  return 3 * int64_t{d.d_model} + 2 * q + 2 * kv + 3 * int64_t{d.d_ff} + d.vocab;
}

MemoryPlan plan_device_memory(const MemoryPlanRequest& r) {
  check_dims(r);
  const ModelDims& d = r.dims;
  MemoryPlan plan;
  plan.weights = {0, align_up(r.weight_bytes)};
  plan.activations = after(
      plan.weights, sizeof(float) * static_cast<size_t>(r.max_rows) * activation_floats_per_row(d));
  plan.attention_scratch = after(
      plan.activations, sizeof(float) * static_cast<size_t>(attention_scratch_floats(
                                            r.max_rows, d.n_heads, d.head_dim, r.max_context)));
  plan.kv_block_bytes = 2 * static_cast<size_t>(d.n_layers) * r.kv_block_size * d.n_kv_heads *
                        d.head_dim * dtype_row_bytes(r.kv_type, 1);
  const size_t usable = r.device_bytes > r.reserve_bytes ? r.device_bytes - r.reserve_bytes : 0;
  plan.inputs = after(plan.attention_scratch, r.input_bytes);
  const size_t kv_start = align_up(plan.inputs.end());
  if (kv_start > usable)
    fail("device memory plan: weights ({} MiB) and buffers ({} MiB) exceed the {} MiB usable",
         plan.weights.bytes >> 20, (kv_start - plan.weights.bytes) >> 20, usable >> 20);
  plan.kv_blocks = static_cast<int>((usable - kv_start) / plan.kv_block_bytes);
  const int needed = (r.max_context + r.kv_block_size - 1) / r.kv_block_size;
  if (plan.kv_blocks < needed)
    fail("device memory plan: room for {} KV blocks, one sequence of {} positions needs {}",
         plan.kv_blocks, r.max_context, needed);
  plan.kv_cache = {kv_start, static_cast<size_t>(plan.kv_blocks) * plan.kv_block_bytes};
  plan.total_bytes = plan.kv_cache.end();
  return plan;
}

}  // namespace tandem::cuda
