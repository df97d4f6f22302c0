// The backend-independent part of kernels.h: the choice of kernels, the checks
// every backend's matmul and attention share, and the stateless helpers.
#include "kernels/kernels.h"

#include <cmath>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/profiling_kernels.h"
#include "kernels/ref/ref_kernels.h"

namespace tandem::kernels {

std::unique_ptr<Kernels> Kernels::create(const KernelConfig& config, ThreadPool& pool,
                                         const KernelLimits& limits) {
  check(limits.max_rows >= 1 && limits.max_k >= 0 && limits.head_dim >= 0 &&
            limits.max_group >= 1 && limits.max_group <= 64,
        "kernels: invalid limits ({} rows, rows of {}, heads of {}, {} query heads per KV head)",
        limits.max_rows, limits.max_k, limits.head_dim, limits.max_group);
  std::unique_ptr<Kernels> kernels;
  if (config.reference)
    kernels = std::make_unique<ref::RefKernels>(pool, limits);
  else
    kernels = std::make_unique<cpu::CpuKernels>(config, pool, limits);
  if (config.profile) return std::make_unique<ProfilingKernels>(std::move(kernels), pool, limits);
  return kernels;
}

void Kernels::matmul(const TensorView& W, const float* x, int M, float* y) {
  const TensorView* w = &W;
  matmul_multi(&w, 1, x, M, &y);
}

void Kernels::matmul_strided(const TensorView& W, const float* x, int M, float* y, int64_t ldy) {
  check(ldy >= W.ne(1), "matmul: output rows of {} floats cannot hold {}'s {} columns", ldy, W.name,
        W.ne(1));
  const TensorView* w = &W;
  checked_matmul(&w, 1, x, M, &y, ldy);
}

void Kernels::matmul_multi(const TensorView* const* Ws, int count, const float* x, int M,
                           float* const* ys) {
  checked_matmul(Ws, count, x, M, ys, 0);
}

void Kernels::checked_matmul(const TensorView* const* Ws, int count, const float* x, int M,
                             float* const* ys, int64_t ldy) {
  if (count <= 0 || M <= 0) return;
  const int64_t K = Ws[0]->ne(0);
  for (int i = 0; i < count; ++i)
    check(Ws[i]->ne(0) == K, "matmul: {} has rows of {} but the input has {} columns", Ws[i]->name,
          Ws[i]->ne(0), K);
  check(M <= limits_.max_rows && K <= limits_.max_k,
        "matmul: {} rows of {} exceed the kernels' scratch ({} rows of at most {})", M, K,
        limits_.max_rows, limits_.max_k);
  matmul_rows(Ws, count, x, M, ys, ldy);
}

void Kernels::attention(const float* q, int n_q, const int* pos, const KVSeqView& kv,
                        const AttentionShape& shape, float* out) {
  if (n_q <= 0) return;
  const AttentionCall call{q, n_q, pos, kv, out};
  attention_batch(&call, 1, shape);
}

void Kernels::attention_batch(const AttentionCall* calls, int n_calls,
                              const AttentionShape& shape) {
  if (n_calls <= 0) return;
  check_attention_shape(shape);
  for (int i = 0; i < n_calls; ++i) {
    check(calls[i].n_q >= 1, "attention: call {} of {} has {} query rows", i, n_calls,
          calls[i].n_q);
    check(calls[i].kv.type == DType::F32 || calls[i].kv.type == DType::F16,
          "attention: KV cache type {} unsupported", dtype_name(calls[i].kv.type));
  }
  attend_batch(calls, n_calls, shape);
}

void Kernels::check_attention_shape(const AttentionShape& shape) const {
  check(shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0,
        "attention: {} query heads cannot be grouped over {} KV heads", shape.n_heads,
        shape.n_kv_heads);
  check(shape.head_dim <= limits_.head_dim && shape.n_heads / shape.n_kv_heads <= limits_.max_group,
        "attention: heads of {} in groups of {} exceed the kernels' scratch (heads of at most {}, "
        "groups of at most {})",
        shape.head_dim, shape.n_heads / shape.n_kv_heads, limits_.head_dim, limits_.max_group);
}

AlignedVector<uint8_t> pack_weights(const TensorView& W, const KernelConfig& config,
                                    ThreadPool& pool) {
  if (!config.pack || config.reference) return {};
  return cpu::pack_matrix(W, config.simd_target, pool);
}

TensorView row_range(const TensorView& W, int64_t begin, int64_t end) {
  TensorView part = W;
  part.shape[1] = end - begin;
  part.data = W.row(begin);
  part.nbytes = part.row_bytes() * static_cast<size_t>(end - begin);
  const bool whole_panels = begin % cpu::kPanelRows == 0 && end % cpu::kPanelRows == 0;
  part.packed = W.packed && whole_panels
                    ? cpu::packed_panel(W.packed, W.type, W.ne(0), begin / cpu::kPanelRows)
                    : nullptr;
  return part;
}

void get_row(const TensorView& W, int64_t r, float* out) { ref::get_row(W, r, out); }

int argmax(const float* x, int n) { return cpu::argmax(x, n); }
float sum_exp(const float* x, int n, float shift, float scale) {
  return cpu::sum_exp(x, n, shift, scale);
}

const char* simd_target_name() { return cpu::simd_target_name(); }

void rope_angles(int pos, const float* inv_freq, int half, float* cos, float* sin) {
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

}  // namespace tandem::kernels
