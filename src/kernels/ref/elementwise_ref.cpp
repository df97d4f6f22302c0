// Reference elementwise kernels: RMSNorm, SwiGLU, bias add, rotary embedding.
#include <cmath>

#include "kernels/ref/ref_kernels.h"

namespace tandem::kernels::ref {

void rmsnorm(const float* x, const float* w, int n, float eps, float* out) {
  float ss = 0.0f;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void swiglu(const float* gate, const float* up, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void add_inplace(float* x, const float* b, int n) {
  for (int i = 0; i < n; ++i) x[i] += b[i];
}

int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return -1;
    if (x[i] > x[best]) best = i;
  }
  return best;
}

void rope(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
          RopeStyle style) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float c = cos[i], s = sin[i];
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<size_t>(h) * head_dim;
      // Normal pairs (2i, 2i+1); NeoX pairs (i, i + half).
      const int a = style == RopeStyle::Normal ? 2 * i : i;
      const int b = style == RopeStyle::Normal ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace tandem::kernels::ref
