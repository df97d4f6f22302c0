// The CUDA kernels, launched on device memory: the operations of
// kernels/kernels.h over a batch of rows, plus the sampler's argmax, softmax
// and top-k. All pointers are device pointers; every call is asynchronous on
// `stream` and checks only that its launch started (synchronize() reports a
// kernel's errors).
//
// Batch invariance is part of the contract, as for the CPU kernels: row m of
// every result is bit-identical whatever the number of rows M (docs/cuda.md
// says how each kernel keeps it).
//
// Declared in every build, defined only where the kernels are built
// (TANDEM_HAVE_CUDA). Checked on an H100 by tests/cuda (docs/cuda.md).
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "cuda/device.h"
#include "cuda/weight_layout.h"
#include "kernels/rope_style.h"

namespace tandem::cuda {

constexpr int kMaxGemmRows = 64;  // rows of one gemm call (decode, verify, a prefill chunk)
constexpr int kMaxTopK = 64;

// Which lanes of a warp read which weights in the matmuls (gemm and the fused
// launches). Both decode every weight to the reference's bits and keep every
// row's result independent of M; they add the products in different orders, so
// their results differ by rounding (docs/cuda.md). The caller names one
// (cuda_model::CudaOptions::gemv owns the choice).
//   Groups: a warp per output column, lane l decodes the 32-element groups l,
//     l + 32, ... with 4-byte loads (group_decode.h).
//   Lanes: a team of 16 or 32 lanes per column (lanes_per_column: K alone), lane
//     l reads the 16-byte chunks l, l + team, ... of the row's main plane as one
//     load each, consecutive lanes consecutive chunks (chunk_decode.h,
//     device/gemv_lanes.cuh). The faster for every model shape measured
//     (docs/cuda.md), so the default.
enum class GemvMapping { Groups, Lanes };

// A weight matrix in the device layout (weight_layout.h) at `data`.
struct DeviceMatrix {
  WeightLayout layout;
  const uint8_t* data = nullptr;
};
// W repacked on the host and copied to `buffer` (sized layout.total_bytes).
DeviceMatrix upload_matrix(const WeightLayout& layout, const uint8_t* ggml, DeviceBuffer& buffer);

// y[m, n] = sum_k W[n, k] * x[m, k] for m < M <= kMaxGemmRows: x is M rows of
// W.layout.k floats, row m of y at y + m * ldy (ldy >= W.layout.n). M == 1 is
// the decode GEMV; larger M (verify, prefill chunks) read each weight once per
// tile of up to 8 rows.
void gemm(const DeviceMatrix& W, const float* x, int M, float* y, int64_t ldy, Stream stream,
          GemvMapping mapping);
// The fused launches (device/gemm_fused.cu): every value they write has the
// bits of the unfused kernels' (gemm, add_rows, rope, kv_store, swiglu), so a
// pass may use either; they take fewer launches and read each activation once
// for two output columns. Any M >= 1 (tiles of up to 8 rows). Each takes the
// mapping of the gemm whose bits it gives.
//
// gemm's contract, two output columns per warp (per team with Lanes).
void gemm_pairs(const DeviceMatrix& W, const float* x, int M, float* y, int64_t ldy, Stream stream,
                GemvMapping mapping);
// out[m, c] = silu(gate x)[m, c] * (up x)[m, c], row stride gate.layout.n: the
// FFN's two matmuls and SwiGLU in one launch.
void gate_up_swiglu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x, int M,
                    float* out, Stream stream, GemvMapping mapping);
// Q, K and V of M rows in one launch: each plus its bias (when bq is set, bk and
// bv are too), Q and K rotated by the rows' angles (as rope), Q to q_out (row
// stride n_heads * head_dim), K and V stored into the paged cache at kv_pos[m]
// of sequence seq[m] (as kv_store).
struct PagedKV;
struct QkvStep {
  const DeviceMatrix* wq = nullptr;
  const DeviceMatrix* wk = nullptr;
  const DeviceMatrix* wv = nullptr;
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  kernels::RopeStyle style = kernels::RopeStyle::Normal;
  const float* cos = nullptr;  // rows x head_dim / 2, as rope takes them
  const float* sin = nullptr;
  const int* seq = nullptr;
  const int* kv_pos = nullptr;
  const int* block_tables = nullptr;
  int table_stride = 0;
};
void qkv_rope_store(const QkvStep& step, const PagedKV& kv, const float* x, int M, float* q_out,
                    Stream stream, GemvMapping mapping);
// Rows ids[i] of W as floats, row i at out + i * W.layout.k (the embedding
// lookup): the device decoder's output, the reference dequantization's bits.
void get_rows(const DeviceMatrix& W, const int* ids, int rows, float* out, Stream stream);

// out = x / rms(x) * w for each of `rows` rows of n floats.
void rmsnorm(const float* x, const float* w, int rows, int n, float eps, float* out, Stream stream);
// The residual step and the next norm in one launch: x += delta, then
// out = rmsnorm(x) * w, row by row.
void add_rmsnorm(float* x, const float* delta, const float* w, int rows, int n, float eps,
                 float* out, Stream stream);
// out = silu(gate) * up, elementwise over n values.
void swiglu(const float* gate, const float* up, int64_t n, float* out, Stream stream);
// x += b, elementwise over n values.
void add_inplace(float* x, const float* b, int64_t n, Stream stream);
// x[r] += b for each of `rows` contiguous rows of row_elems floats (a bias
// added to every row: Qwen2's Q, K and V biases). Each value is x + b, as the
// CPU's add_inplace of one row.
void add_rows(float* x, const float* b, int rows, int row_elems, Stream stream);
// Rotates n_heads heads of head_dim values of each of `rows` rows (row r at
// x + r * row_stride) by row r's angles: cos and sin are rows x head_dim / 2
// (kernels::rope_angles of each row's position).
void rope(float* x, int rows, int64_t row_stride, int n_heads, int head_dim, const float* cos,
          const float* sin, kernels::RopeStyle style, Stream stream);

// Per row of n floats: the first index of the largest value, -1 if any is NaN.
void argmax_rows(const float* x, int rows, int n, int* out, Stream stream);
// Per row: softmax(x) into out.
void softmax_rows(const float* x, int rows, int n, float* out, Stream stream);
// Per row: the k <= min(n, kMaxTopK) largest values and their indices, largest
// first, ties by the lower index; NaN is never chosen.
void topk_rows(const float* x, int rows, int n, int k, int* indices, float* values, Stream stream);

// One layer's paged KV cache on the device: blocks of block_size positions,
// each position a row of n_kv_heads * head_dim values of `type` (F32 or F16),
// block b at b * block_size rows from the pool's start, as the CPU cache's
// KVSeqView.
struct PagedKV {
  void* k_pool = nullptr;  // written by kv_store, read by paged_attention
  void* v_pool = nullptr;
  DType type = DType::F16;
  int block_size = 0;
};

// Causal attention for `rows` query rows (n_heads * head_dim floats each): row r
// belongs to sequence seq[r], sits at position pos[r] and attends to positions
// [0, pos[r]], whose block b is block_tables[seq[r] * table_stride + b] of the
// pools. max_keys >= every pos[r] + 1 (host value, sizes the grid); scratch
// holds attention_scratch_floats(rows, n_heads, head_dim, max_keys) floats.
//
// With a remap (a drafted tree's nodes, stored side by side), the positions are
// logical, as KVSeqView's: row r reads logical position p >= remap_from[r] from
// physical position remap[r * remap_stride + p - remap_from[r]], and the
// positions below remap_from[r] from their own rows.
struct AttentionArgs {
  const float* q = nullptr;
  float* out = nullptr;
  int rows = 0;
  const int* seq = nullptr;
  const int* pos = nullptr;
  const int* block_tables = nullptr;
  int table_stride = 0;
  int max_keys = 0;
  float* scratch = nullptr;
  const int* remap = nullptr;  // null: no remap
  const int* remap_from = nullptr;
  int remap_stride = 0;
};
struct AttentionDims {
  int n_heads = 0;
  int n_kv_heads = 0;  // divides n_heads
  int head_dim = 0;    // at most kMaxHeadDim
  float scale = 0.0f;
};
void paged_attention(const AttentionArgs& args, const PagedKV& kv, const AttentionDims& dims,
                     Stream stream);
// Stores `rows` new positions into the cache: row r of k and v (row_elems =
// n_kv_heads * head_dim floats each) goes to position pos[r] of sequence seq[r],
// through its block table, converted to kv.type (F16 rounds to nearest even,
// as the CPU cache's f32_to_f16).
void kv_store(const float* k, const float* v, int rows, int row_elems, const int* seq,
              const int* pos, const int* block_tables, int table_stride, const PagedKV& kv,
              Stream stream);

}  // namespace tandem::cuda
