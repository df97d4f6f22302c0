// RMSNorm, alone and fused with the residual add before it (cuda_kernels.h).
//
// One thread block per row: thread t takes elements t, t + 256, ... in order,
// then the block sums the partial sums of squares in a fixed order
// (block_reduce.cuh). A row's result depends on its own values alone: batch
// invariant.
#include <cuda_runtime.h>

#include "cuda/cuda_kernels.h"
#include "cuda/device/block_reduce.cuh"
#include "cuda/device/check.cuh"

namespace tandem::cuda {
namespace {

constexpr int kNormThreads = 256;

// kAdd: x += delta first (stored back: the residual stream), then the norm.
template <bool kAdd>
__global__ void __launch_bounds__(kNormThreads)
    norm_kernel(float* x, const float* __restrict__ delta, const float* __restrict__ w, int n,
                float eps, float* out) {
  __shared__ float scratch[32];
  const int64_t base = int64_t{blockIdx.x} * n;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += kNormThreads) {
    float v = x[base + i];
    if constexpr (kAdd) {
      v = v + delta[base + i];
      x[base + i] = v;
    }
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  // Each thread reads back only the elements it wrote (out may be x): no sync needed.
  for (int i = threadIdx.x; i < n; i += kNormThreads) out[base + i] = x[base + i] * scale * w[i];
}

}  // namespace

void rmsnorm(const float* x, const float* w, int rows, int n, float eps, float* out,
             Stream stream) {
  if (rows < 1 || n < 1) raise_error("cuda::rmsnorm: empty input");
  // x is only read when kAdd is false.
  norm_kernel<false>
      <<<rows, kNormThreads, 0, stream>>>(const_cast<float*>(x), nullptr, w, n, eps, out);
  check_launch("cuda::rmsnorm");
}

void add_rmsnorm(float* x, const float* delta, const float* w, int rows, int n, float eps,
                 float* out, Stream stream) {
  if (rows < 1 || n < 1) raise_error("cuda::add_rmsnorm: empty input");
  norm_kernel<true><<<rows, kNormThreads, 0, stream>>>(x, delta, w, n, eps, out);
  check_launch("cuda::add_rmsnorm");
}

}  // namespace tandem::cuda
