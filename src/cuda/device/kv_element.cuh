// One value of the paged KV cache, written as the cache's type: F32 as is, F16
// rounded to nearest even (the host's f32_to_f16). Shared by kv_store and the
// fused Q/K/V launch, which must store the same bits.
#pragma once
#include <cuda_fp16.h>

namespace tandem::cuda {

__device__ __forceinline__ void store_kv(float* dst, float v) { *dst = v; }
__device__ __forceinline__ void store_kv(__half* dst, float v) { *dst = __float2half_rn(v); }

}  // namespace tandem::cuda
