// The narrow interface between the model and its compute kernels. The model's
// forward pass calls a Kernels object, chosen once when the model's transformer
// is made: the SIMD CPU kernels at one instruction set, or the scalar reference
// (later a GPU backend beside them); their insides can change without the model
// knowing. A Kernels object owns the scratch its kernels need, sized at
// construction for the largest call it must serve (KernelLimits), so that no
// call allocates; hence one call at a time per object (each transformer has its
// own).
//
// Batch invariance is part of the contract: the result for one row (position)
// never depends on how many rows share the call or what they contain, so a
// position's logits are bit-identical in prefill, decode and verification.
#pragma once
#include <cstdint>
#include <memory>

#include "core/aligned.h"
#include "core/dtype.h"
#include "core/kv_view.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/kernel_config.h"
#include "kernels/rope_style.h"

namespace tandem::kernels {

// One sequence's query rows in a batched attention call (attention_batch).
struct AttentionCall {
  const float* q;
  int n_q;
  const int* pos;
  KVSeqView kv;
  float* out;
};

struct AttentionShape {
  int n_heads;
  int n_kv_heads;  // n_heads is a multiple: grouped-query attention
  int head_dim;
  float scale;  // usually 1/sqrt(head_dim)
};

// The largest call a Kernels object serves; its scratch is sized for these.
struct KernelProfile;  // kernels/profiling_kernels.h

struct KernelLimits {
  int max_rows = 1;   // activation rows of a matmul
  int64_t max_k = 0;  // length of a matmul's input rows
  int head_dim = 0;   // of attention calls
  int max_group = 1;  // query heads per KV head of attention calls (at most 64)
};

class Kernels {
 public:
  // The kernels `config` selects, running on `pool` (which must outlive them),
  // with scratch for calls within `limits`. Throws tandem::Error for a SIMD
  // target this build or CPU lacks.
  static std::unique_ptr<Kernels> create(const KernelConfig& config, ThreadPool& pool,
                                         const KernelLimits& limits);
  virtual ~Kernels() = default;
  Kernels(const Kernels&) = delete;
  Kernels& operator=(const Kernels&) = delete;

  // The instruction set the SIMD kernels run (e.g. "AVX3_DL"), or "reference".
  virtual const char* name() const = 0;
  // What the calls took, where KernelConfig::profile asked for it; null otherwise.
  virtual KernelProfile* profile() { return nullptr; }
  ThreadPool& pool() const { return pool_; }

  // y[m, n] = sum_k W[n, k] * x[m, k] for m < M, n < N, where W has shape {K, N}
  // (any supported weight type), x is M rows of K floats and y is M rows of N
  // floats. Throws tandem::Error when M or K exceed the limits.
  void matmul(const TensorView& W, const float* x, int M, float* y);
  // The same with row m of y at y + m * ldy (ldy >= N): columns of a wider matrix.
  void matmul_strided(const TensorView& W, const float* x, int M, float* y, int64_t ldy);
  // Several matrices applied to the same input in one parallel region:
  // ys[i] = x * Ws[i]^T for i < count (all Ws share K). Activations are quantized
  // once per form the weight types need (e.g. shared by Q/K/V, or gate/up), and
  // every result is bit-identical to a separate matmul call.
  void matmul_multi(const TensorView* const* Ws, int count, const float* x, int M,
                    float* const* ys);

  // out = x / rms(x) * w, over n elements.
  virtual void rmsnorm(const float* x, const float* w, int n, float eps, float* out) = 0;
  // out = silu(gate) * up, elementwise.
  virtual void swiglu(const float* gate, const float* up, int n, float* out) = 0;
  // x += b, elementwise.
  virtual void add_inplace(float* x, const float* b, int n) = 0;
  // Rotate n_heads heads of head_dim values in place by the angles of one
  // position (rope_angles).
  virtual void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                    RopeStyle style) = 0;
  // Causal attention for n_q query rows of one sequence. Row i (n_heads * head_dim
  // floats of q) sits at position pos[i] and attends to cache positions [0, pos[i]]
  // (logical positions, read through kv's remap if it has one), whose K/V must
  // already be written. out has the same layout as q. Throws
  // tandem::Error for a head size or grouping beyond the limits.
  void attention(const float* q, int n_q, const int* pos, const KVSeqView& kv,
                 const AttentionShape& shape, float* out);
  // attention() for several sequences, each call's result the same as alone:
  // their work may share one parallel region (a batch of decode rows is one
  // call per sequence, each too small to be worth starting a region for).
  void attention_batch(const AttentionCall* calls, int n_calls, const AttentionShape& shape);

 protected:
  Kernels(ThreadPool& pool, const KernelLimits& limits) : pool_(pool), limits_(limits) {}
  // matmul_multi with row m of ys[i] at ys[i] + m * ldy, or (ldy == 0) at
  // ys[i] + m * N_i; the arguments are checked.
  virtual void matmul_rows(const TensorView* const* Ws, int count, const float* x, int M,
                           float* const* ys, int64_t ldy) = 0;
  // attention_batch with its arguments checked (n_calls >= 1, every n_q >= 1).
  virtual void attend_batch(const AttentionCall* calls, int n_calls,
                            const AttentionShape& shape) = 0;

 private:
  void check_attention_shape(const AttentionShape& shape) const;
  void checked_matmul(const TensorView* const* Ws, int count, const float* x, int M,
                      float* const* ys, int64_t ldy);
  ThreadPool& pool_;
  KernelLimits limits_;
};

// A copy of matrix W in the layout the matmul of `config`'s target reads fastest
// (Q4_K, Q6_K, Q4_0, Q4_1, Q5_0, Q8_0 with AVX-512 VNNI: 16 rows interleaved),
// made once at load; empty when there is none for W's type, shape or that
// target, or when config.pack is off or config.reference on. Point W.packed at
// its data for matmul to use it.
AlignedVector<uint8_t> pack_weights(const TensorView& W, const KernelConfig& config,
                                    ThreadPool& pool);

// Rows [begin, end) of matrix W as a view (with its packed copy where the range
// allows).
TensorView row_range(const TensorView& W, int64_t begin, int64_t end);

// Row r of a (possibly quantized) matrix as floats (embedding lookup).
void get_row(const TensorView& W, int64_t r, float* out);

// The first index of the largest of n values, or -1 if any is NaN (the
// sampler's; the SIMD kernels of this CPU's best target).
int argmax(const float* x, int n);

// The sum over n values of exp((x[i] - shift) * scale), in float (terms below
// the smallest normal float, -infinity included, add nothing; NaN propagates).
// With shift the largest x[i] every term is at most 1: a softmax's
// denominator, for readings that tolerate float rounding (a draft model's
// confidence in a token, which only steers the draft policy).
float sum_exp(const float* x, int n, float shift, float scale);

// The instruction set of this CPU's best SIMD target, e.g. "AVX3_DL" (what
// Kernels::create picks unless told otherwise).
const char* simd_target_name();

// The rotation of position pos: cos and sin of pos * inv_freq[i] for the
// head_dim / 2 inverse frequencies (any long-context scaling already applied).
// Computed once per position of a forward pass and shared by every layer's Q
// and K (per call they were a fifth of the verify pass's non-matmul time).
void rope_angles(int pos, const float* inv_freq, int half, float* cos, float* sin);

}  // namespace tandem::kernels
