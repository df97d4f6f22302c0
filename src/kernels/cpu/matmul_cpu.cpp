// The matmul driver: quantizes the activations once per form the weights need,
// cuts the output columns of every matrix into chunks, numbered in memory order,
// and hands each pool thread a contiguous run of them first
// (ThreadPool::run_chunks). Work is split by output columns
// only, never inside a dot product, so which thread computes a column does not
// change its value.
#include <algorithm>

#include "core/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/matmul_chunk.h"
#include "quant/quants.h"

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
  AlignedVector<float>& w = c.scratch->dequant;
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

// One call's chunks: matrix 0's columns in runs of `cols`, then matrix 1's, and
// so on, numbered in that order and taken by the threads from a shared counter.
// A chunk is made when it is taken, so no list of them is kept.
struct MatmulPlan {
  const TensorView* const* Ws;
  int count;
  const float* x;
  int M;
  float* const* ys;
  int64_t ldy;  // 0: each output dense
  int64_t cols;
  int64_t total_chunks;
  const TargetKernels* fn;
  const QActs* q8;
  const QActs* q8k;
  int64_t prefetch_bytes, prefetch_packed_bytes;
  bool non_temporal;

  void run(int64_t index, WorkerScratch& scratch) const {
    int i = 0;
    int64_t first = index;  // the chunk's number within matrix i
    for (int64_t n; first >= (n = (Ws[i]->ne(1) + cols - 1) / cols); first -= n) ++i;
    const TensorView& W = *Ws[i];
    MatmulChunk c{};
    c.type = W.type;
    c.w = W.data;
    // A packed copy is used when this target's kernel reads it (packing follows
    // the model's KernelConfig, while a Kernels object may run another target).
    if (W.packed && fn->matmul_packed) c.packed = W.packed;
    c.row_bytes = W.row_bytes();
    c.K = W.ne(0);
    c.n0 = first * cols;
    c.n1 = std::min(W.ne(1), c.n0 + cols);
    c.m0 = 0;
    c.m1 = M;
    c.x = x;
    const ActKind kind = act_kind(W.type);
    c.acts = kind == ActKind::Q8 ? q8 : q8k;
    c.y = ys[i];
    c.ldy = ldy > 0 ? ldy : W.ne(1);
    c.scratch = &scratch;
    c.prefetch_bytes = c.packed ? prefetch_packed_bytes : prefetch_bytes;
    c.non_temporal = non_temporal;
    if (c.packed) return fn->matmul_packed(c);  // any packed type, either activation form
    switch (kind) {
      case ActKind::Float:
        return fn->matmul_float(c);
      case ActKind::Q8:
        return fn->matmul_legacy(c);
      case ActKind::Q8K:
        return fn->matmul_kquant(c);
    }
  }
};

}  // namespace

void CpuKernels::matmul_rows(const TensorView* const* Ws, int count, const float* x, int M,
                             float* const* ys, int64_t ldy) {
  const int64_t K = Ws[0]->ne(0);
  bool need_q8 = false, need_q8k = false;
  int64_t total_columns = 0;
  for (int i = 0; i < count; ++i) {
    const ActKind kind = act_kind(Ws[i]->type);
    need_q8 |= kind == ActKind::Q8;
    need_q8k |= kind == ActKind::Q8K;
    total_columns += Ws[i]->ne(1);
  }
  if (need_q8) quantize_acts(fn_, x, M, K, 32, q8_);
  if (need_q8k) quantize_acts(fn_, x, M, K, 256, q8k_);

  MatmulPlan plan{Ws,
                  count,
                  x,
                  M,
                  ys,
                  ldy,
                  chunk_columns(total_columns, pool().size()),
                  0,
                  &fn_,
                  &q8_,
                  &q8k_,
                  prefetch_bytes_,
                  prefetch_packed_bytes_,
                  non_temporal_};
  for (int i = 0; i < count; ++i) plan.total_chunks += (Ws[i]->ne(1) + plan.cols - 1) / plan.cols;
  // The job captures one reference, so that std::function keeps it without
  // allocating.
  struct Job {
    const MatmulPlan& plan;
    std::vector<WorkerScratch>& workers;
  } job{plan, workers_};
  pool().run_chunks(plan.total_chunks,
                    [&job](int64_t i, int thread) { job.plan.run(i, job.workers[thread]); });
}

}  // namespace tandem::kernels::cpu
