// Entry points of kernels.h. Each forwards to the SIMD CPU kernels (which pick
// the instruction set at run time), or to the scalar reference when the
// environment says TANDEM_KERNELS=ref (for debugging and A/B comparisons).
#include "kernels/kernels.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/ref/ref_kernels.h"

namespace tandem::kernels {
namespace {

bool use_ref() {
  static const bool ref = [] {
    const char* v = std::getenv("TANDEM_KERNELS");
    return v != nullptr && std::strcmp(v, "ref") == 0;
  }();
  return ref;
}

}  // namespace

bool using_reference_kernels() { return use_ref(); }
const char* simd_target_name() { return cpu::simd_target_name(); }

void matmul(const TensorView& W, const float* x, int M, float* y, ThreadPool& pool) {
  if (use_ref()) return ref::matmul(W, x, M, y, pool);
  const TensorView* w = &W;
  cpu::matmul_multi(&w, 1, x, M, &y, pool);
}
void matmul_multi(const TensorView* const* Ws, int count, const float* x, int M,
                  float* const* ys, ThreadPool& pool) {
  if (use_ref()) {
    for (int i = 0; i < count; ++i) ref::matmul(*Ws[i], x, M, ys[i], pool);
    return;
  }
  cpu::matmul_multi(Ws, count, x, M, ys, pool);
}
AlignedVector<uint8_t> pack_weights(const TensorView& W, ThreadPool& pool) {
  static const bool disabled = [] {
    const char* v = std::getenv("TANDEM_PACK");
    return v != nullptr && std::strcmp(v, "0") == 0;
  }();
  if (disabled || use_ref()) return {};
  return cpu::pack_matrix(W, pool);
}

TensorView row_range(const TensorView& W, int64_t begin, int64_t end) {
  TensorView part = W;
  part.shape[1] = end - begin;
  part.data = W.row(begin);
  part.nbytes = part.row_bytes() * static_cast<size_t>(end - begin);
  const bool whole_panels = begin % cpu::kPanelRows == 0 && end % cpu::kPanelRows == 0;
  part.packed = W.packed && whole_panels
                    ? cpu::packed_panel(W.packed, W.type, W.ne(0), begin / cpu::kPanelRows)
                    : nullptr;
  return part;
}

void get_row(const TensorView& W, int64_t r, float* out) { ref::get_row(W, r, out); }
void rmsnorm(const float* x, const float* w, int n, float eps, float* out) {
  if (use_ref()) return ref::rmsnorm(x, w, n, eps, out);
  cpu::rmsnorm(x, w, n, eps, out);
}
void swiglu(const float* gate, const float* up, int n, float* out) {
  if (use_ref()) return ref::swiglu(gate, up, n, out);
  cpu::swiglu(gate, up, n, out);
}
void add_inplace(float* x, const float* b, int n) {
  if (use_ref()) return ref::add_inplace(x, b, n);
  cpu::add_inplace(x, b, n);
}
int argmax(const float* x, int n) {
  if (use_ref()) return ref::argmax(x, n);
  return cpu::argmax(x, n);
}
void rope_angles(int pos, const float* inv_freq, int half, float* cos, float* sin) {
  for (int i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}
void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
          RopeStyle style) {
  if (use_ref()) return ref::rope(x, n_heads, head_dim, cos, sin, style);
  cpu::rope(x, n_heads, head_dim, cos, sin, style);
}
void attention(const float* q, int n_q, const int* pos, const KVSeqView& kv,
               const AttentionShape& shape, float* out, ThreadPool& pool) {
  if (use_ref()) return ref::attention(q, n_q, pos, kv, shape, out, pool);
  cpu::attention(q, n_q, pos, kv, shape, out, pool);
}

}  // namespace tandem::kernels
