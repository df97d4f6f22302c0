// The sampler's row operations on the device (cuda_kernels.h): argmax, softmax
// and top-k. One thread block per row; thread t scans elements t, t + 256, ...
// and the block combines the threads' results in a fixed order
// (block_reduce.cuh), so a row's result depends on that row alone.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>

#include "cuda/cuda_kernels.h"
#include "cuda/device/block_reduce.cuh"
#include "cuda/device/check.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr Candidate kNone{-INFINITY, INT_MAX};

// The first index of the largest value (the comparison is exact, so the result
// equals the CPU's bit for bit), or -1 when the row holds a NaN.
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float* __restrict__ x, int n, int* __restrict__ out) {
  __shared__ float values[32];
  __shared__ int indices[32];
  const float* row = x + int64_t{blockIdx.x} * n;
  Candidate best = kNone;
  bool nan = false;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const Candidate c{row[i], i};
    nan = nan || isnan(c.value);
    if (better(c, best)) best = c;
  }
  nan = __syncthreads_or(nan);
  best = block_best(best, values, indices);
  if (threadIdx.x == 0) out[blockIdx.x] = nan ? -1 : best.index;
}

__global__ void __launch_bounds__(kThreads)
    softmax_kernel(const float* __restrict__ x, int n, float* __restrict__ out) {
  __shared__ float scratch[32];
  const int64_t base = int64_t{blockIdx.x} * n;
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < n; i += kThreads) mx = fmaxf(mx, x[base + i]);
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) sum += expf(x[base + i] - mx);
  sum = block_sum(sum, scratch);
  const float inv = 1.0f / sum;
  for (int i = threadIdx.x; i < n; i += kThreads) out[base + i] = expf(x[base + i] - mx) * inv;
}

// k rounds of selection: round j takes the best candidate ranked below round
// j - 1's pick (smaller value, or the same value at a higher index). O(k n) per
// row, no scratch; NaN compares false everywhere and is never picked. A row
// with fewer than k non-NaN values ends with index -1.
__global__ void __launch_bounds__(kThreads)
    topk_kernel(const float* __restrict__ x, int n, int k, int* __restrict__ indices,
                float* __restrict__ values) {
  __shared__ float sv[32];
  __shared__ int si[32];
  const float* row = x + int64_t{blockIdx.x} * n;
  Candidate prev{INFINITY, -1};  // ranked above everything
  for (int j = 0; j < k; ++j) {
    Candidate best = kNone;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const Candidate c{row[i], i};
      const bool below = c.value < prev.value || (c.value == prev.value && c.index > prev.index);
      if (below && better(c, best)) best = c;
    }
    best = block_best(best, sv, si);
    if (threadIdx.x == 0) {
      indices[int64_t{blockIdx.x} * k + j] = best.index == INT_MAX ? -1 : best.index;
      values[int64_t{blockIdx.x} * k + j] = best.value;
    }
    prev = best;
  }
}

}  // namespace

void argmax_rows(const float* x, int rows, int n, int* out, Stream stream) {
  if (rows < 1 || n < 1) raise_error("cuda::argmax_rows: empty input");
  argmax_kernel<<<rows, kThreads, 0, stream>>>(x, n, out);
  check_launch("cuda::argmax_rows");
}

void softmax_rows(const float* x, int rows, int n, float* out, Stream stream) {
  if (rows < 1 || n < 1) raise_error("cuda::softmax_rows: empty input");
  softmax_kernel<<<rows, kThreads, 0, stream>>>(x, n, out);
  check_launch("cuda::softmax_rows");
}

void topk_rows(const float* x, int rows, int n, int k, int* indices, float* values, Stream stream) {
  if (rows < 1 || n < 1 || k < 1 || k > n || k > kMaxTopK)
    raise_error("cuda::topk_rows: k must be in [1, min(n, 64)]");
  topk_kernel<<<rows, kThreads, 0, stream>>>(x, n, k, indices, values);
  check_launch("cuda::topk_rows");
}

}  // namespace tandem::cuda
