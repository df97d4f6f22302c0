// Reductions over one thread block in a fixed order, so that a row reduced by a
// block gives the same bits on every run and in every batch: each warp combines
// its lanes in an xor butterfly (every lane ends with the same value: each step
// adds the same two operands, in either order), then every warp does the same
// over the warps' results. Every thread gets the result.
#pragma once
#include <cuda_runtime.h>

#include <climits>
#include <cmath>

namespace tandem::cuda {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// `scratch`: 32 floats of shared memory, free for the call (it syncs before
// writing them, so back-to-back calls may share it). blockDim.x: a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x % 32 < blockDim.x / 32 ? scratch[threadIdx.x % 32] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  v = warp_max(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x % 32 < blockDim.x / 32 ? scratch[threadIdx.x % 32] : -INFINITY;
  return warp_max(v);
}

// The better of two (value, index) candidates: the larger value, then the lower
// index. A total order on non-NaN values, so any reduction order picks the same.
struct Candidate {
  float value;
  int index;
};
__device__ __forceinline__ bool better(const Candidate& a, const Candidate& b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}
// The best candidate of the block; `values`/`indices`: 32 entries of shared memory.
__device__ __forceinline__ Candidate block_best(Candidate c, float* values, int* indices) {
  auto warp_best = [](Candidate c) {
    for (int o = 16; o > 0; o /= 2) {
      const Candidate other{__shfl_xor_sync(kFullMask, c.value, o),
                            __shfl_xor_sync(kFullMask, c.index, o)};
      if (better(other, c)) c = other;
    }
    return c;
  };
  c = warp_best(c);
  __syncthreads();
  if (threadIdx.x % 32 == 0) {
    values[threadIdx.x / 32] = c.value;
    indices[threadIdx.x / 32] = c.index;
  }
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  c = lane < blockDim.x / 32 ? Candidate{values[lane], indices[lane]}
                             : Candidate{-INFINITY, INT_MAX};
  return warp_best(c);
}

}  // namespace tandem::cuda
