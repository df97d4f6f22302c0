// SwiGLU, the residual add and rotary embedding (cuda_kernels.h): one thread
// per output value, each value computed from its own inputs alone (batch
// invariant by construction).
#include <cuda_runtime.h>

#include "cuda/cuda_kernels.h"
#include "cuda/device/check.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void swiglu_kernel(const float* __restrict__ gate, const float* __restrict__ up,
                              int64_t n, float* __restrict__ out) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  out[i] = g / (1.0f + expf(-g)) * up[i];
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ b, int64_t n) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < n) x[i] += b[i];
}

// x[r, i] += b[i]: the same bias added to every row (one thread per value).
__global__ void add_rows_kernel(float* __restrict__ x, const float* __restrict__ b, int64_t n,
                                int row_elems) {
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i < n) x[i] += b[i % row_elems];
}

// One thread per rotated pair: row r, head h, pair i (Normal: (2i, 2i+1), NeoX:
// (i, i + half)), with row r's angle i.
__global__ void rope_kernel(float* x, int rows, int64_t row_stride, int n_heads, int head_dim,
                            const float* __restrict__ cos, const float* __restrict__ sin,
                            bool neox) {
  const int half = head_dim / 2;
  const int64_t idx = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (idx >= int64_t{rows} * n_heads * half) return;
  const int i = static_cast<int>(idx % half);
  const int h = static_cast<int>(idx / half % n_heads);
  const int64_t r = idx / half / n_heads;
  float* v = x + r * row_stride + int64_t{h} * head_dim;
  const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
  const float c = cos[r * half + i], s = sin[r * half + i];
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}

}  // namespace

void swiglu(const float* gate, const float* up, int64_t n, float* out, Stream stream) {
  if (n < 1) return;
  swiglu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate, up, n, out);
  check_launch("cuda::swiglu");
}

void add_inplace(float* x, const float* b, int64_t n, Stream stream) {
  if (n < 1) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, b, n);
  check_launch("cuda::add_inplace");
}

void add_rows(float* x, const float* b, int rows, int row_elems, Stream stream) {
  const int64_t n = int64_t{rows} * row_elems;
  if (n < 1) return;
  add_rows_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, b, n, row_elems);
  check_launch("cuda::add_rows");
}

void rope(float* x, int rows, int64_t row_stride, int n_heads, int head_dim, const float* cos,
          const float* sin, kernels::RopeStyle style, Stream stream) {
  if (head_dim % 2 != 0) raise_error("cuda::rope: head_dim must be even");
  const int64_t pairs = int64_t{rows} * n_heads * (head_dim / 2);
  if (pairs < 1) return;
  rope_kernel<<<blocks_for(pairs), kThreads, 0, stream>>>(
      x, rows, row_stride, n_heads, head_dim, cos, sin, style == kernels::RopeStyle::NeoX);
  check_launch("cuda::rope");
}

}  // namespace tandem::cuda
