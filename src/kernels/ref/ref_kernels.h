// The scalar reference kernels: the plainest correct implementation of every
// operation in kernels.h. They define what the fast kernels must compute (tests
// compare against them) and run anywhere. They allocate their small row buffers
// per call: they serve debugging and comparisons, not speed.
#pragma once
#include "kernels/kernels.h"

namespace tandem::kernels::ref {

// Row m of y at y + m * ldy, or (ldy == 0) at y + m * N.
void matmul(const TensorView& W, const float* x, int M, float* y, ThreadPool& pool,
            int64_t ldy = 0);
void get_row(const TensorView& W, int64_t r, float* out);
void rmsnorm(const float* x, const float* w, int n, float eps, float* out);
void swiglu(const float* gate, const float* up, int n, float* out);
void add_inplace(float* x, const float* b, int n);
int argmax(const float* x, int n);
void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin, RopeStyle style);
void attention(const float* q, int n_q, const int* pos, const KVSeqView& kv,
               const AttentionShape& shape, float* out, ThreadPool& pool);

// The reference kernels behind the Kernels interface (KernelConfig::reference).
class RefKernels final : public Kernels {
 public:
  RefKernels(ThreadPool& pool, const KernelLimits& limits) : Kernels(pool, limits) {}
  const char* name() const override { return "reference"; }
  void rmsnorm(const float* x, const float* w, int n, float eps, float* out) override {
    ref::rmsnorm(x, w, n, eps, out);
  }
  void swiglu(const float* gate, const float* up, int n, float* out) override {
    ref::swiglu(gate, up, n, out);
  }
  void add_inplace(float* x, const float* b, int n) override { ref::add_inplace(x, b, n); }
  void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
            RopeStyle style) override {
    ref::rope(x, n_heads, head_dim, cos, sin, style);
  }

 protected:
  void matmul_rows(const TensorView* const* Ws, int count, const float* x, int M, float* const* ys,
                   int64_t ldy) override {
    for (int i = 0; i < count; ++i) ref::matmul(*Ws[i], x, M, ys[i], pool(), ldy);
  }
  void attend_batch(const AttentionCall* calls, int n_calls, const AttentionShape& shape) override {
    for (int i = 0; i < n_calls; ++i) {
      const AttentionCall& c = calls[i];
      ref::attention(c.q, c.n_q, c.pos, c.kv, shape, c.out, pool());
    }
  }
};

}  // namespace tandem::kernels::ref
