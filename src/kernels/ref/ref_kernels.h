// The scalar reference kernels: the plainest correct implementation of every
// operation in kernels.h. They define what the fast kernels must compute (tests
// compare against them) and run anywhere.
#pragma once
#include "kernels/kernels.h"

namespace tandem::kernels::ref {

void matmul(const TensorView& W, const float* x, int M, float* y, ThreadPool& pool);
void get_row(const TensorView& W, int64_t r, float* out);
void rmsnorm(const float* x, const float* w, int n, float eps, float* out);
void swiglu(const float* gate, const float* up, int n, float* out);
void add_inplace(float* x, const float* b, int n);
int argmax(const float* x, int n);
void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin, RopeStyle style);
void attention(const float* q, int n_q, const int* pos, const KVSeqView& kv,
               const AttentionShape& shape, float* out, ThreadPool& pool);

}  // namespace tandem::kernels::ref
