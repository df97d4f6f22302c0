// The narrow interface between the model and its compute kernels. The model's
// forward pass calls only these functions; their insides (scalar reference,
// SIMD, later CUDA) can change without the model knowing.
//
// Batch invariance is part of the contract: the result for one row (position)
// never depends on how many rows share the call or what they contain, so a
// position's logits are bit-identical in prefill, decode and verification.
#pragma once
#include <cstdint>

#include "core/aligned.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "kernels/rope_style.h"

namespace tandem::kernels {

// y[m, n] = sum_k W[n, k] * x[m, k] for m < M, n < N, where W has shape {K, N}
// (any supported weight type), x is M rows of K floats and y is M rows of N floats.
void matmul(const TensorView& W, const float* x, int M, float* y, ThreadPool& pool);

// Several matrices applied to the same input in one parallel region:
// ys[i] = x * Ws[i]^T for i < count (all Ws share K). Activations are quantized
// once per form the weight types need (e.g. shared by Q/K/V, or gate/up), and
// every result is bit-identical to a separate matmul call.
void matmul_multi(const TensorView* const* Ws, int count, const float* x, int M,
                  float* const* ys, ThreadPool& pool);

// A copy of matrix W in the layout this machine's fastest matmul reads (Q4_K,
// Q6_K, Q4_0, Q4_1, Q5_0, Q8_0 with AVX-512 VNNI: 16 rows interleaved), made once
// at load; empty when
// there is none for W's type, shape or this CPU, or when TANDEM_PACK=0. Point
// W.packed at its data for matmul to use it.
AlignedVector<uint8_t> pack_weights(const TensorView& W, ThreadPool& pool);

// Rows [begin, end) of matrix W as a view (with its packed copy where the range
// allows).
TensorView row_range(const TensorView& W, int64_t begin, int64_t end);

// Row r of a (possibly quantized) matrix as floats (embedding lookup).
void get_row(const TensorView& W, int64_t r, float* out);

// out = x / rms(x) * w, over n elements.
void rmsnorm(const float* x, const float* w, int n, float eps, float* out);

// out = silu(gate) * up, elementwise.
void swiglu(const float* gate, const float* up, int n, float* out);

// x += b, elementwise.
void add_inplace(float* x, const float* b, int n);
// The first index of the largest of n values, or -1 if any is NaN.
int argmax(const float* x, int n);

// The rotation of position pos: cos and sin of pos * inv_freq[i] for the
// head_dim / 2 inverse frequencies (any long-context scaling already applied).
// Computed once per position of a forward pass and shared by every layer's Q
// and K (per call they were a fifth of the verify pass's non-matmul time).
void rope_angles(int pos, const float* inv_freq, int half, float* cos, float* sin);

// Rotate n_heads heads of head_dim values in place by the angles of one position.
void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin, RopeStyle style);

// K and V of one layer for one sequence. Position p lives in block p / block_size
// at row p % block_size; a row holds n_kv_heads * head_dim values of `type`
// (F32 or F16). A contiguous cache is one block as long as the context.
struct KVSeqView {
  const void* const* k_blocks = nullptr;
  const void* const* v_blocks = nullptr;
  int block_size = 0;
  DType type = DType::F32;
};

struct AttentionShape {
  int n_heads;
  int n_kv_heads;  // n_heads is a multiple: grouped-query attention
  int head_dim;
  float scale;     // usually 1/sqrt(head_dim)
};

// Causal attention for n_q query rows of one sequence. Row i (n_heads * head_dim
// floats of q) sits at position pos[i] and attends to cache positions [0, pos[i]],
// whose K/V must already be written. out has the same layout as q.
void attention(const float* q, int n_q, const int* pos, const KVSeqView& kv,
               const AttentionShape& shape, float* out, ThreadPool& pool);

// True when TANDEM_KERNELS=ref routes every call to the scalar reference kernels.
bool using_reference_kernels();
// The instruction set the CPU kernels run on this machine, e.g. "AVX3_DL".
const char* simd_target_name();

}  // namespace tandem::kernels
