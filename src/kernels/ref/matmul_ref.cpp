// Reference matmul: dequantize one weight row at a time and take plain float dot
// products with every input row. Threads split the output columns; each dot
// product is summed in index order, so a row's result does not depend on M.
#include <vector>

#include "kernels/ref/ref_kernels.h"
#include "quant/quants.h"

namespace tandem::kernels::ref {

void matmul(const TensorView& W, const float* x, int M, float* y, ThreadPool& pool, int64_t ldy) {
  const int64_t K = W.ne(0), N = W.ne(1);
  const size_t stride = static_cast<size_t>(ldy > 0 ? ldy : N);
  pool.parallel_for(N, [&](int64_t n0, int64_t n1, int) {
    std::vector<float> w(static_cast<size_t>(K));
    for (int64_t n = n0; n < n1; ++n) {
      dequantize_row(W.type, W.row(n), w.data(), K);
      for (int m = 0; m < M; ++m) {
        const float* xm = x + static_cast<size_t>(m) * K;
        float sum = 0.0f;
        for (int64_t k = 0; k < K; ++k) sum += w[k] * xm[k];
        y[static_cast<size_t>(m) * stride + n] = sum;
      }
    }
  });
}

void get_row(const TensorView& W, int64_t r, float* out) {
  dequantize_row(W.type, W.row(r), out, W.ne(0));
}

}  // namespace tandem::kernels::ref
