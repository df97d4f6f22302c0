// The SIMD CPU implementation of kernels.h (see there for the contracts). Each
// entry point picks the best instruction set of this machine at run time
// (Highway dynamic dispatch, once per call).
#pragma once
#include "kernels/kernels.h"

namespace tandem::kernels::cpu {

void matmul_multi(const TensorView* const* Ws, int count, const float* x, int M,
                  float* const* ys, ThreadPool& pool);
void rmsnorm(const float* x, const float* w, int n, float eps, float* out);
void swiglu(const float* gate, const float* up, int n, float* out);
void add_inplace(float* x, const float* b, int n);
int argmax(const float* x, int n);
// n floats to IEEE halves (2n bytes at out, any alignment), as f32_to_f16.
void f32_to_f16_row(const float* x, void* out, int64_t n);
void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin, RopeStyle style);
void attention(const float* q, int n_q, const int* pos, const KVSeqView& kv,
               const AttentionShape& shape, float* out, ThreadPool& pool);

// The instruction set the dispatcher picked on this machine, e.g. "AVX3_DL".
const char* simd_target_name();

}  // namespace tandem::kernels::cpu
