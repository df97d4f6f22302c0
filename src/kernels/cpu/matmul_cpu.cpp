// The matmul driver: quantizes the activations once per form the weights need,
// cuts the output columns of every matrix into chunks and lets the pool's
// threads take chunks from a shared counter. Work is split by output columns
// only, never inside a dot product, so which thread computes a column does not
// change its value.
#include <algorithm>
#include <atomic>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/matmul_chunk.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/quants.h"

namespace tandem::kernels::cpu {

ActKind act_kind(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return ActKind::Float;
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
      return ActKind::Q8;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      return ActKind::Q8K;
    default:
      fail("matmul: weight type {} is not supported", dtype_name(t));
  }
}

void matmul_chunk_dequant(const MatmulChunk& c) {
  static thread_local std::vector<float> w;
  w.resize(c.K);
  for (int64_t n = c.n0; n < c.n1; ++n) {
    dequantize_row(c.type, c.w + n * c.row_bytes, w.data(), c.K);
    for (int m = c.m0; m < c.m1; ++m) {
      const float* x = c.x + m * c.K;
      float sum = 0.0f;
      for (int64_t k = 0; k < c.K; ++k) sum += w[k] * x[k];
      c.y[m * c.ldy + n] = sum;
    }
  }
}

namespace {

// Columns per chunk: enough chunks for the threads to balance (the machine is
// shared, so a thread may stall), few enough that each streams a sizeable run
// of contiguous weight rows.
int64_t chunk_columns(int64_t total_columns, int threads) {
  int64_t cols = (total_columns + threads * 8 - 1) / (threads * 8);
  cols = (cols + 15) / 16 * 16;
  return std::clamp<int64_t>(cols, 16, 512);
}

void run_chunk(MatmulChunk c, ActKind kind, int M) {
  c.m0 = 0;
  c.m1 = M;
  if (c.packed) return matmul_chunk_packed(c);  // any packed type, either activation form
  switch (kind) {
    case ActKind::Float: matmul_chunk_float(c); break;
    case ActKind::Q8: matmul_chunk_legacy(c); break;
    case ActKind::Q8K: matmul_chunk_kquant(c); break;
  }
}

}  // namespace

void matmul_multi(const TensorView* const* Ws, int count, const float* x, int M,
                  float* const* ys, ThreadPool& pool) {
  if (count <= 0 || M <= 0) return;
  const int64_t K = Ws[0]->ne(0);
  bool need_q8 = false, need_q8k = false;
  int64_t total_columns = 0;
  for (int i = 0; i < count; ++i) {
    const TensorView& W = *Ws[i];
    check(W.ne(0) == K, "matmul: {} has rows of {} but the input has {} columns", W.name,
          W.ne(0), K);
    const ActKind kind = act_kind(W.type);
    need_q8 |= kind == ActKind::Q8;
    need_q8k |= kind == ActKind::Q8K;
    total_columns += W.ne(1);
  }
  // Per calling thread: reused across calls, so steady-state decode allocates nothing.
  static thread_local QActs q8, q8k;
  static thread_local std::vector<std::pair<MatmulChunk, ActKind>> chunks;
  if (need_q8) quantize_acts(x, M, K, 32, q8);
  if (need_q8k) quantize_acts(x, M, K, 256, q8k);

  chunks.clear();
  const int64_t cols = chunk_columns(total_columns, pool.size());
  for (int i = 0; i < count; ++i) {
    const TensorView& W = *Ws[i];
    MatmulChunk c{};
    c.type = W.type;
    c.w = W.data;
    // A packed copy is used when this machine's kernel reads it (packing makes
    // one only then; tests may force another instruction set).
    if (W.packed && packed_kernel_available()) c.packed = W.packed;
    c.row_bytes = W.row_bytes();
    c.K = K;
    c.x = x;
    const ActKind kind = act_kind(W.type);
    c.acts = kind == ActKind::Q8 ? &q8 : &q8k;
    c.y = ys[i];
    c.ldy = W.ne(1);
    for (int64_t n0 = 0; n0 < W.ne(1); n0 += cols) {
      c.n0 = n0;
      c.n1 = std::min(W.ne(1), n0 + cols);
      chunks.emplace_back(c, kind);
    }
  }
  std::atomic<size_t> next{0};
  const auto& work = chunks;
  pool.run_self_scheduled([&](int) {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < work.size();)
      run_chunk(work[i].first, work[i].second, M);
  });
}

}  // namespace tandem::kernels::cpu
