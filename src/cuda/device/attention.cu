// Paged causal attention with split-K (cuda_kernels.h: paged_attention;
// attention_plan.h: the chunking).
//
// Pass 1, one thread block per (chunk, head, row). A decode step has few such
// blocks (the 1.5B shape at context 128: 12 on 132 SMs), so a block's time is
// the latency of its dependent loads, and the rule is to issue each phase's
// loads all at once, 16 bytes each:
//  - thread t finds key t's cached row (through the remap, if any, and the
//    block table) into shared memory;
//  - the scores q.k * scale: thread t loads key t's whole head (16-byte
//    vectors, kVectorsInFlight at a time) and adds its products in element
//    order with fmaf;
//  - their max, p = exp(score - max) and their sum, in a fixed order;
//  - the weighted values: a key's head is hd / E vectors of E elements (E = 8
//    for F16, 4 for F32); L = min(32, hd / E) lanes take one key's vectors
//    (lane i the vectors i, i + L, ...), so a warp holds 32 / L such groups:
//    the kernel's slots. Slot s takes the keys s, s + slots, ... in order
//    (kKeysInFlight keys' loads at a time) and keeps its own sums; the slots'
//    sums are then added in slot order.
// (A thread per key loading one element at a time, or a warp per key, waited
// on one load after another: a quarter of a decode step, docs/cuda.md.)
// Pass 2, one block per (head, row): the chunks' partials combined in chunk
// order, rescaled to the overall max. A row of one chunk is finished by pass 1
// with the same float operations pass 2 would apply (0 + v * 1, over 0 +
// sum * 1), and pass 2 leaves it alone. A row's chunks and every order above
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
static_assert(kThreads >= kAttentionChunk, "the scores take one thread per key");
constexpr int kHeadDimStep = 8;  // head_dim a multiple of it: whole 16-byte vectors of F16 and F32
constexpr int kVectorsInFlight = 16;  // a key's 16-byte loads in flight at once (the scores)
constexpr int kKeysInFlight = 8;  // a slot's keys whose loads are in flight at once (the values)
// A lane of a slot keeps at most 8 values: ceil(hd / (32 E)) vectors of E, hd <= 256.
constexpr int kSlotValues = 8;
// The slots' sums: per warp (32 / L) x hd floats, which is at most 32 E <= 256
// (L = hd / E <= 32) or hd <= 256 (one slot a warp).
constexpr int kSlotFloats = kWarps * 256;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

// One 16-byte vector of E = 16 / sizeof(KV) elements, kept as loaded (its
// floats are made where they are used: a thread holds many vectors in flight).
template <typename KV>
struct Vector {
  static constexpr int kElems = 16 / static_cast<int>(sizeof(KV));
  uint4 raw;
  __device__ __forceinline__ void load(const KV* p) {
    raw = __ldg(reinterpret_cast<const uint4*>(p));
  }
  __device__ __forceinline__ float operator[](int i) const {
    return to_float(reinterpret_cast<const KV*>(&raw)[i]);
  }
};

// The pool offset (in elements) of head kvh of the cached row of logical
// position p of row r's sequence: its physical position (through the remap, if
// any), then its block.
__device__ __forceinline__ int64_t kv_offset(const AttentionArgs& a, int r, const int* table,
                                             int block_size, int p, int row_elems, int kvh,
                                             int head_dim) {
  if (a.remap && p >= a.remap_from[r])
    p = a.remap[int64_t{r} * a.remap_stride + p - a.remap_from[r]];
  const int64_t row = int64_t{table[p / block_size]} * block_size + p % block_size;
  return row * row_elems + int64_t{kvh} * head_dim;
}

template <typename KV>
__global__ void __launch_bounds__(kThreads)
    chunk_kernel(AttentionArgs a, const KV* __restrict__ k_pool, const KV* __restrict__ v_pool,
                 int block_size, AttentionDims d, int n_chunks) {
  using Vec = Vector<KV>;
  constexpr int E = Vec::kElems;
  __shared__ float q[kMaxHeadDim];
  __shared__ float p[kAttentionChunk];
  __shared__ int64_t offset[kAttentionChunk];
  __shared__ float scratch[32];
  __shared__ float slot_sums[kSlotFloats];
  const int c = blockIdx.x, h = blockIdx.y, r = blockIdx.z;
  const int n_keys = a.pos[r] + 1, first = c * kAttentionChunk;
  if (first >= n_keys) return;  // the whole block: this row has fewer chunks
  const int count = min(kAttentionChunk, n_keys - first);
  const int hd = d.head_dim, kvh = h / (d.n_heads / d.n_kv_heads);
  const int row_elems = d.n_kv_heads * hd;
  const int* table = a.block_tables + int64_t{a.seq[r]} * a.table_stride;
  const float* qh = a.q + (int64_t{r} * d.n_heads + h) * hd;
  const int t = threadIdx.x;
  for (int i = t; i < hd; i += kThreads) q[i] = qh[i];
  if (t < count) offset[t] = kv_offset(a, r, table, block_size, first + t, row_elems, kvh, hd);
  __syncthreads();

  // The scores: a thread per key, its head in 16-byte vectors.
  const int vectors = hd / E;
  if (t < count) {
    const KV* kr = k_pool + offset[t];
    float dot = 0.0f;
    for (int v0 = 0; v0 < vectors; v0 += kVectorsInFlight) {
      Vec kv[kVectorsInFlight];
#pragma unroll
      for (int u = 0; u < kVectorsInFlight; ++u)
        if (v0 + u < vectors) kv[u].load(kr + (v0 + u) * E);
#pragma unroll
      for (int u = 0; u < kVectorsInFlight; ++u) {
        if (v0 + u >= vectors) break;
#pragma unroll
        for (int e = 0; e < E; ++e) dot = fmaf(q[(v0 + u) * E + e], kv[u][e], dot);
      }
    }
    p[t] = dot * d.scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int i = t; i < count; i += kThreads) mx = fmaxf(mx, p[i]);
  mx = block_max(mx, scratch);
  float sum = 0.0f;
  for (int i = t; i < count; i += kThreads) {
    const float e = expf(p[i] - mx);
    p[i] = e;
    sum += e;
  }
  sum = block_sum(sum, scratch);  // its syncs also publish p

  // The weighted values: slot s over the keys s, s + slots, ...; lane i of
  // the slot over the vectors i, i + L, ... of each key's head.
  const int lanes = min(32, vectors), groups = 32 / lanes;
  const int slots = kWarps * groups, lane = t % 32;
  const int slot = t / 32 * groups + lane / lanes, li = lane % lanes;
  const bool active = lane < groups * lanes;
  const int mine = (vectors - li + lanes - 1) / lanes;  // this lane's vectors of a key
  float acc[kSlotValues];
#pragma unroll
  for (int j = 0; j < kSlotValues; ++j) acc[j] = 0.0f;
  if (active) {
    for (int k0 = slot; k0 < count; k0 += slots * kKeysInFlight) {
      Vec vv[kKeysInFlight][kSlotValues / E];
#pragma unroll
      for (int u = 0; u < kKeysInFlight; ++u) {
        const int key = k0 + u * slots;
        if (key >= count) break;
#pragma unroll
        for (int m = 0; m < kSlotValues / E; ++m)
          if (m < mine) vv[u][m].load(v_pool + offset[key] + (li + m * lanes) * E);
      }
#pragma unroll
      for (int u = 0; u < kKeysInFlight; ++u) {
        const int key = k0 + u * slots;
        if (key >= count) break;
        const float pk = p[key];
#pragma unroll
        for (int m = 0; m < kSlotValues / E; ++m)
#pragma unroll
          for (int e = 0; e < E; ++e)
            if (m < mine) acc[m * E + e] = fmaf(pk, vv[u][m][e], acc[m * E + e]);
      }
    }
#pragma unroll
    for (int m = 0; m < kSlotValues / E; ++m)
#pragma unroll
      for (int e = 0; e < E; ++e)
        if (m < mine) slot_sums[slot * hd + (li + m * lanes) * E + e] = acc[m * E + e];
  }
  __syncthreads();
  if (n_keys <= kAttentionChunk) {  // one chunk: pass 2's operations, here
    float* out = a.out + (int64_t{r} * d.n_heads + h) * hd;
    const float denom = 0.0f + sum * 1.0f;
    for (int i = t; i < hd; i += kThreads) {
      float total = 0.0f;
      for (int s = 0; s < slots; ++s) total += slot_sums[s * hd + i];
      out[i] = (0.0f + total * 1.0f) / denom;
    }
    return;
  }
  float* part = a.scratch + ((int64_t{r} * d.n_heads + h) * n_chunks + c) * (hd + 2);
  for (int i = t; i < hd; i += kThreads) {
    float total = 0.0f;
    for (int s = 0; s < slots; ++s) total += slot_sums[s * hd + i];
    part[2 + i] = total;
  }
  if (t == 0) {
    part[0] = mx;
    part[1] = sum;
  }
}

__global__ void __launch_bounds__(kThreads)
    combine_kernel(AttentionArgs a, AttentionDims d, int n_chunks) {
  const int h = blockIdx.x, r = blockIdx.y, hd = d.head_dim;
  const int chunks = attention_chunks(a.pos[r] + 1);
  if (chunks == 1) return;  // pass 1 finished the row
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
  if (n_chunks > 1)  // else pass 1 finished every row
    combine_kernel<<<grid2, kThreads, 0, stream>>>(a, d, n_chunks);
}

}  // namespace

void paged_attention(const AttentionArgs& a, const PagedKV& kv, const AttentionDims& d,
                     Stream stream) {
  if (a.rows < 1 || a.max_keys < 1 || kv.block_size < 1)
    raise_error("cuda::paged_attention: empty call");
  if (d.head_dim < kHeadDimStep || d.head_dim > kMaxHeadDim || d.head_dim % kHeadDimStep != 0 ||
      d.n_kv_heads < 1 || d.n_heads % d.n_kv_heads != 0)
    raise_error(
        "cuda::paged_attention: head_dim must be a multiple of 8 in [8, 256] and n_kv_heads "
        "divide n_heads");
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
