// Paged causal attention with split-K (cuda_kernels.h: paged_attention;
// attention_plan.h: the chunking).
//
// Pass 1, one thread block per (chunk, head, row), every step spread over the
// block's threads so that the loads of many keys are in flight at once (a step
// that walks the keys one after another waits for each load in turn: measured
// on the H100, that made attention most of a decode step):
//  - the scores q.k * scale: a thread per key, its dot product over head_dim in
//    element order;
//  - their max, p = exp(score - max) and their sum, in a fixed order;
//  - the weighted values: warp w takes the keys w, w + kWarps, ... in order,
//    lane l the values l, l + 32, ... of head_dim; the warps' sums are then
//    added in warp order.
// Pass 2, one block per (head, row): the chunks' partials combined in chunk
// order, rescaled to the overall max. A row's chunks and every order above
// depend on its own position only, so its output is the same bits in any
// batch. Positions are logical: a tree's rows read their ancestors through the
// remap (cuda_kernels.h).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/attention_plan.h"
#include "cuda/cuda_kernels.h"
#include "cuda/device/block_reduce.cuh"
#include "cuda/device/check.cuh"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;  // at least kAttentionChunk: a thread per key
constexpr int kWarps = kThreads / 32;
constexpr int kValuesPerLane = kMaxHeadDim / 32;
static_assert(kThreads >= kAttentionChunk, "the scores take one thread per key");

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

// Head kvh of the cached row of logical position p of row r's sequence: its
// physical position (through the remap, if any), then its block.
template <typename KV>
__device__ __forceinline__ const KV* kv_row(const KV* pool, const AttentionArgs& a, int r,
                                            const int* table, int block_size, int p, int row_elems,
                                            int kvh, int head_dim) {
  if (a.remap && p >= a.remap_from[r])
    p = a.remap[int64_t{r} * a.remap_stride + p - a.remap_from[r]];
  const int64_t row = int64_t{table[p / block_size]} * block_size + p % block_size;
  return pool + row * row_elems + int64_t{kvh} * head_dim;
}

template <typename KV>
__global__ void __launch_bounds__(kThreads)
    chunk_kernel(AttentionArgs a, const KV* __restrict__ k_pool, const KV* __restrict__ v_pool,
                 int block_size, AttentionDims d, int n_chunks) {
  __shared__ float q[kMaxHeadDim];
  __shared__ float p[kAttentionChunk];
  __shared__ float scratch[32];
  __shared__ float values[kWarps][kMaxHeadDim];  // each warp's weighted values
  const int c = blockIdx.x, h = blockIdx.y, r = blockIdx.z;
  const int n_keys = a.pos[r] + 1, first = c * kAttentionChunk;
  if (first >= n_keys) return;  // the whole block: this row has fewer chunks
  const int count = min(kAttentionChunk, n_keys - first);
  const int hd = d.head_dim, kvh = h / (d.n_heads / d.n_kv_heads);
  const int row_elems = d.n_kv_heads * hd;
  const int* table = a.block_tables + int64_t{a.seq[r]} * a.table_stride;
  const float* qh = a.q + (int64_t{r} * d.n_heads + h) * hd;
  for (int i = threadIdx.x; i < hd; i += kThreads) q[i] = qh[i];
  __syncthreads();

  if (threadIdx.x < count) {  // the scores: a thread per key
    const int t = threadIdx.x;
    const KV* kr = kv_row(k_pool, a, r, table, block_size, first + t, row_elems, kvh, hd);
    float dot = 0.0f;
#pragma unroll 8
    for (int i = 0; i < hd; ++i) dot = fmaf(q[i], to_float(kr[i]), dot);
    p[t] = dot * d.scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int t = threadIdx.x; t < count; t += kThreads) mx = fmaxf(mx, p[t]);
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int t = threadIdx.x; t < count; t += kThreads) {
    const float e = expf(p[t] - mx);
    p[t] = e;
    sum += e;
  }
  sum = block_sum(sum, scratch);  // its syncs also publish p

  // The weighted values: each warp over its keys, each lane over its values.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float acc[kValuesPerLane];
  for (int j = 0; j < kValuesPerLane; ++j) acc[j] = 0.0f;
#pragma unroll 4
  for (int t = warp; t < count; t += kWarps) {
    const KV* vr = kv_row(v_pool, a, r, table, block_size, first + t, row_elems, kvh, hd);
    const float pt = p[t];
    for (int j = 0; j < kValuesPerLane; ++j) {
      const int i = lane + 32 * j;
      if (i < hd) acc[j] = fmaf(pt, to_float(vr[i]), acc[j]);
    }
  }
  for (int j = 0; j < kValuesPerLane; ++j) {
    const int i = lane + 32 * j;
    if (i < hd) values[warp][i] = acc[j];
  }
  __syncthreads();
  float* part = a.scratch + ((int64_t{r} * d.n_heads + h) * n_chunks + c) * (hd + 2);
  for (int i = threadIdx.x; i < hd; i += kThreads) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += values[w][i];
    part[2 + i] = total;
  }
  if (threadIdx.x == 0) {
    part[0] = mx;
    part[1] = sum;
  }
}

__global__ void __launch_bounds__(kThreads)
    combine_kernel(AttentionArgs a, AttentionDims d, int n_chunks) {
  const int h = blockIdx.x, r = blockIdx.y, hd = d.head_dim;
  const int chunks = attention_chunks(a.pos[r] + 1);
  const float* part = a.scratch + (int64_t{r} * d.n_heads + h) * n_chunks * (hd + 2);
  float mx = -INFINITY;
  for (int c = 0; c < chunks; ++c) mx = fmaxf(mx, part[c * (hd + 2)]);
  float denom = 0.0f;
  for (int c = 0; c < chunks; ++c) denom += part[c * (hd + 2) + 1] * expf(part[c * (hd + 2)] - mx);
  float* out = a.out + (int64_t{r} * d.n_heads + h) * hd;
  for (int i = threadIdx.x; i < hd; i += kThreads) {
    float acc = 0.0f;
    for (int c = 0; c < chunks; ++c)
      acc += part[c * (hd + 2) + 2 + i] * expf(part[c * (hd + 2)] - mx);
    out[i] = acc / denom;
  }
}

template <typename KV>
void launch(const AttentionArgs& a, const PagedKV& kv, const AttentionDims& d, Stream stream) {
  const int n_chunks = attention_chunks(a.max_keys);
  const dim3 grid1(n_chunks, d.n_heads, a.rows), grid2(d.n_heads, a.rows);
  chunk_kernel<KV><<<grid1, kThreads, 0, stream>>>(a, static_cast<const KV*>(kv.k_pool),
                                                   static_cast<const KV*>(kv.v_pool), kv.block_size,
                                                   d, n_chunks);
  combine_kernel<<<grid2, kThreads, 0, stream>>>(a, d, n_chunks);
}

}  // namespace

void paged_attention(const AttentionArgs& a, const PagedKV& kv, const AttentionDims& d,
                     Stream stream) {
  if (a.rows < 1 || a.max_keys < 1 || kv.block_size < 1)
    raise_error("cuda::paged_attention: empty call");
  if (d.head_dim < 1 || d.head_dim > kMaxHeadDim || d.n_kv_heads < 1 ||
      d.n_heads % d.n_kv_heads != 0)
    raise_error(
        "cuda::paged_attention: head_dim must be in [1, 256] and n_kv_heads divide n_heads");
  if (kv.type == DType::F32) {
    launch<float>(a, kv, d, stream);
  } else if (kv.type == DType::F16) {
    launch<__half>(a, kv, d, stream);
  } else {
    raise_error("cuda::paged_attention: the KV cache must be F32 or F16");
  }
  check_launch("cuda::paged_attention");
}

}  // namespace tandem::cuda
