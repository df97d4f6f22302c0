// The fused matmul launches (cuda_kernels.h: gemm_pairs, gate_up_swiglu,
// qkv_rope_store): fewer launches per layer and fewer activation loads, with
// gemm's arithmetic.
//
// A warp computes two output columns for a tile of up to MT activation rows.
// Each column's sum is exactly gemm's: lane l takes the groups l, l + 32, ...
// of the weight row, adds the 32 products of each group to one accumulator per
// row in element order with fmaf, and the warp sums its lanes in the same xor
// butterfly. The two columns only share the activation loads (each x value is
// read once for both), so every output value has gemm's bits, and batch
// invariance holds for the same reason as gemm's. What follows the matmul (a
// bias, RoPE, the KV store, SwiGLU) is done in the epilogue with the same float
// operations as the separate kernels (elementwise.cu, kv_store.cu).
//
// The weight type is a kernel argument, not a template parameter: the matrices
// fused in one launch may differ (a Q4_K_M file's attn_v is Q6_K in some layers
// and Q4_K in others), and each warp's type is uniform across its lanes.
// (Under Lanes, a and b of different types cannot share the activation loads:
// their chunks hold different elements.)
//
// With GemvMapping::Lanes a team of 16 or 32 lanes (lanes_per_column: K alone,
// as gemm's) takes each unit of work (a pair, a RoPE pair, a column of gate and
// up) and sums each column exactly as gemm's lanes kernel does
// (device/gemv_lanes.cuh): every value keeps gemm's bits under either mapping.
// Under Groups a team is a warp, as the launches first ran on the H100.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/cuda_kernels.h"
#include "cuda/device/block_reduce.cuh"
#include "cuda/device/check.cuh"
#include "cuda/device/gemv_lanes.cuh"
#include "cuda/device/kv_element.cuh"
#include "cuda/group_decode.h"
#include "cuda/weight_type.h"

namespace tandem::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
static_assert(32 * kWarpsPerBlock == kLanesBlock, "grid_for counts blocks of kLanesBlock threads");

__device__ __forceinline__ void decode_any(DType t, const WeightPlanes& w, int64_t col, int64_t g,
                                           float out[kGroup]) {
  with_weight_type(t, [&](auto tag) { decode_group<decltype(tag)::value>(w, col, g, out); });
}

// One column of a matrix: its planes, type and index.
struct Column {
  DType type;
  WeightPlanes w;
  int64_t col;
};

// sa[r], sb[r]: gemm's sums of columns a and b for rows m0 + r < m0 + rows, in
// every lane. x: rows of k floats.
template <int MT>
__device__ __forceinline__ void pair_sums(const Column& a, const Column& b, int64_t k,
                                          const float* __restrict__ x, int m0, int rows,
                                          float (&sa)[MT], float (&sb)[MT]) {
  const int lane = threadIdx.x % 32;
  float acc_a[MT], acc_b[MT];
  for (int r = 0; r < MT; ++r) acc_a[r] = acc_b[r] = 0.0f;
  const int64_t groups = k / kGroup;
  for (int64_t g = lane; g < groups; g += 32) {
    float wa[kGroup], wb[kGroup];
    decode_any(a.type, a.w, a.col, g, wa);
    decode_any(b.type, b.w, b.col, g, wb);
    for (int r = 0; r < MT; ++r) {
      if (r >= rows) break;
      const auto* xr = reinterpret_cast<const float4*>(x + (m0 + r) * k + g * kGroup);
      for (int q = 0; q < kGroup / 4; ++q) {
        const float4 v = xr[q];
        acc_a[r] = fmaf(wa[4 * q], v.x, acc_a[r]);
        acc_b[r] = fmaf(wb[4 * q], v.x, acc_b[r]);
        acc_a[r] = fmaf(wa[4 * q + 1], v.y, acc_a[r]);
        acc_b[r] = fmaf(wb[4 * q + 1], v.y, acc_b[r]);
        acc_a[r] = fmaf(wa[4 * q + 2], v.z, acc_a[r]);
        acc_b[r] = fmaf(wb[4 * q + 2], v.z, acc_b[r]);
        acc_a[r] = fmaf(wa[4 * q + 3], v.w, acc_a[r]);
        acc_b[r] = fmaf(wb[4 * q + 3], v.w, acc_b[r]);
      }
    }
  }
  for (int r = 0; r < MT; ++r) {
    sa[r] = warp_sum(acc_a[r]);
    sb[r] = warp_sum(acc_b[r]);
  }
}

// gemm's lanes sums of column c alone, in every lane of team t.
template <int MT>
__device__ __forceinline__ void lanes_column_sums(const Team& t, const Column& c, int64_t k,
                                                  const float* __restrict__ x, int m0, int rows,
                                                  float (&sums)[MT]) {
  const WeightPlanes w[1] = {c.w};
  const int64_t col[1] = {c.col};
  float s[1][MT];
  lanes_sums_any<1, MT>(c.type, t, w, col, k, x, m0, rows, s);
  for (int r = 0; r < MT; ++r) sums[r] = s[0][r];
}

// gemm's sums of columns a and b under mapping G, in every lane of team t (a
// warp under Groups). kOneType: a and b are columns of one matrix (gemm_pairs,
// qkv_rope_store), so of one type; else (gate_up_swiglu) their types may differ.
template <GemvMapping G, bool kOneType, int MT>
__device__ __forceinline__ void column_sums(const Team& t, const Column& a, const Column& b,
                                            int64_t k, const float* __restrict__ x, int m0,
                                            int rows, float (&sa)[MT], float (&sb)[MT]) {
  if constexpr (G == GemvMapping::Groups) {
    pair_sums<MT>(a, b, k, x, m0, rows, sa, sb);
  } else {
    if (kOneType || a.type == b.type) {  // one chunk loop, the activations loaded once
      const WeightPlanes w[2] = {a.w, b.w};
      const int64_t col[2] = {a.col, b.col};
      float s[2][MT];
      lanes_sums_any<2, MT>(a.type, t, w, col, k, x, m0, rows, s);
      for (int r = 0; r < MT; ++r) {
        sa[r] = s[0][r];
        sb[r] = s[1][r];
      }
      return;
    }
    if constexpr (!kOneType) {  // each column's own chunk map: one after the other
      lanes_column_sums<MT>(t, a, k, x, m0, rows, sa);
      lanes_column_sums<MT>(t, b, k, x, m0, rows, sb);
    }
  }
}

Column column(const DeviceMatrix& W) { return {W.layout.type, weight_planes(W.layout, W.data), 0}; }

// The lanes of a unit of work: a warp under Groups, lanes_per_column(k) under Lanes.
int team_size(GemvMapping mapping, int64_t k) {
  return mapping == GemvMapping::Lanes ? lanes_per_column(k) : 32;
}

// ---- gemm_pairs: columns 2p and 2p + 1 (the last alone when n is odd).
template <GemvMapping G, int MT>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    gemm_pairs_kernel(Column w, int64_t k, int64_t n, const float* __restrict__ x, int m,
                      float* __restrict__ y, int64_t ldy, int team_size) {
  const Team t = make_team(team_size);
  const int64_t first = 2 * t.index;
  if (first >= n) return;  // the whole team
  const bool second = first + 1 < n;
  Column a = w, b = w;
  a.col = first;
  b.col = second ? first + 1 : first;
  const int m0 = blockIdx.y * MT, rows = min(MT, m - m0);
  float sa[MT], sb[MT];
  column_sums<G, true, MT>(t, a, b, k, x, m0, rows, sa, sb);
  if (t.lane != 0) return;
  for (int r = 0; r < rows; ++r) {
    y[(m0 + r) * ldy + first] = sa[r];
    if (second) y[(m0 + r) * ldy + first + 1] = sb[r];
  }
}

// ---- gate_up_swiglu: column c of gate and of up; out = silu(gate) * up, as
// swiglu_kernel computes it.
template <GemvMapping G, int MT>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    gate_up_kernel(Column gate, Column up, int64_t k, int64_t n, const float* __restrict__ x, int m,
                   float* __restrict__ out, int team_size) {
  const Team t = make_team(team_size);
  const int64_t c = t.index;
  if (c >= n) return;
  gate.col = up.col = c;
  const int m0 = blockIdx.y * MT, rows = min(MT, m - m0);
  float g[MT], u[MT];
  column_sums<G, false, MT>(t, gate, up, k, x, m0, rows, g, u);
  if (t.lane != 0) return;
  for (int r = 0; r < rows; ++r) out[(m0 + r) * n + c] = g[r] / (1.0f + expf(-g[r])) * u[r];
}

// ---- qkv_rope_store: a warp (a team) takes one rotated pair of Q or K (the two columns
// RoPE mixes) or two neighbouring columns of V. Q goes to q_out rotated; K
// rotated and V go straight into the paged cache at each row's position.
struct QkvKernelArgs {
  Column wq, wk, wv;
  const float* bq;  // null: no biases
  const float* bk;
  const float* bv;
  int64_t k;  // d_model
  int n_heads, n_kv_heads, head_dim;
  bool neox;
  const float* cos;
  const float* sin;
  float* q_out;
  const int* seq;
  const int* kv_pos;
  const int* block_tables;
  int table_stride, block_size;
  void* k_pool;
  void* v_pool;
};

template <GemvMapping G, int MT, typename KV>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    qkv_kernel(QkvKernelArgs p, const float* __restrict__ x, int m, int team_size) {
  const Team t = make_team(team_size);
  const int half = p.head_dim / 2;
  const int64_t q_pairs = int64_t{p.n_heads} * half, kv_pairs = int64_t{p.n_kv_heads} * half;
  int64_t pair = t.index;
  if (pair >= q_pairs + 2 * kv_pairs) return;
  // Which matrix, and its two columns.
  const int part = pair < q_pairs ? 0 : pair < q_pairs + kv_pairs ? 1 : 2;
  pair -= part == 0 ? 0 : part == 1 ? q_pairs : q_pairs + kv_pairs;
  Column a = part == 0 ? p.wq : part == 1 ? p.wk : p.wv;
  Column b = a;
  const int i = static_cast<int>(pair % half);  // the rotated pair within its head
  if (part < 2) {
    const int64_t head = pair / half;
    a.col = head * p.head_dim + (p.neox ? i : 2 * i);
    b.col = head * p.head_dim + (p.neox ? i + half : 2 * i + 1);
  } else {
    a.col = 2 * pair;
    b.col = 2 * pair + 1;
  }
  const int m0 = blockIdx.y * MT, rows = min(MT, m - m0);
  float sa[MT], sb[MT];
  column_sums<G, true, MT>(t, a, b, p.k, x, m0, rows, sa, sb);
  if (t.lane != 0) return;
  const float* bias = part == 0 ? p.bq : part == 1 ? p.bk : p.bv;
  const int64_t kv_dim = int64_t{p.n_kv_heads} * p.head_dim;
  for (int r = 0; r < rows; ++r) {
    const int row = m0 + r;
    float ya = sa[r], yb = sb[r];
    if (bias) {  // add_rows: each value x + b
      ya += bias[a.col];
      yb += bias[b.col];
    }
    if (part < 2) {  // rope_kernel's rotation, with this row's angle i
      const float c = p.cos[row * half + i], s = p.sin[row * half + i];
      const float x0 = ya, x1 = yb;
      ya = x0 * c - x1 * s;
      yb = x0 * s + x1 * c;
    }
    if (part == 0) {
      const int64_t q_dim = int64_t{p.n_heads} * p.head_dim;
      p.q_out[row * q_dim + a.col] = ya;
      p.q_out[row * q_dim + b.col] = yb;
      continue;
    }
    const int pos = p.kv_pos[row];  // kv_store_kernel's destination
    const int64_t block = p.block_tables[int64_t{p.seq[row]} * p.table_stride + pos / p.block_size];
    const int64_t at = (block * p.block_size + pos % p.block_size) * kv_dim;
    KV* pool = static_cast<KV*>(part == 1 ? p.k_pool : p.v_pool);
    store_kv(pool + at + a.col, ya);
    store_kv(pool + at + b.col, yb);
  }
}

// Blocks of 32 * kWarpsPerBlock threads for `units` teams, times the row tiles.
dim3 grid_for(int64_t units, int team, int M, int mt) {
  return dim3(lanes_blocks(units, team), static_cast<unsigned>((M + mt - 1) / mt));
}

// The tile of rows, as gemm chooses it: under Groups the whole call up to 4
// rows, else 8; under Lanes 1 row or 8 (two tiles only, as gemm's lanes kernels).
template <template <int> class Launch, typename... Args>
void by_tile(int M, GemvMapping mapping, Args&&... args) {
  constexpr GemvMapping kGroups = GemvMapping::Groups, kLanes = GemvMapping::Lanes;
  if (mapping == kLanes) {
    if (M == 1) return Launch<1>::template go<kLanes>(M, args...);
    return Launch<8>::template go<kLanes>(M, args...);
  }
  if (M == 1) {
    Launch<1>::template go<kGroups>(M, args...);
  } else if (M == 2) {
    Launch<2>::template go<kGroups>(M, args...);
  } else if (M <= 4) {
    Launch<4>::template go<kGroups>(M, args...);
  } else {
    Launch<8>::template go<kGroups>(M, args...);
  }
}

template <int MT>
struct PairsLaunch {
  template <GemvMapping G>
  static void go(int M, const DeviceMatrix& W, const float* x, float* y, int64_t ldy,
                 Stream stream) {
    const WeightLayout& l = W.layout;
    const int team = team_size(G, l.k);
    gemm_pairs_kernel<G, MT>
        <<<grid_for((l.n + 1) / 2, team, M, MT), 32 * kWarpsPerBlock, 0, stream>>>(
            column(W), l.k, l.n, x, M, y, ldy, team);
  }
};

template <int MT>
struct GateUpLaunch {
  template <GemvMapping G>
  static void go(int M, const DeviceMatrix& gate, const DeviceMatrix& up, const float* x,
                 float* out, Stream stream) {
    const int team = team_size(G, gate.layout.k);
    gate_up_kernel<G, MT><<<grid_for(gate.layout.n, team, M, MT), 32 * kWarpsPerBlock, 0, stream>>>(
        column(gate), column(up), gate.layout.k, gate.layout.n, x, M, out, team);
  }
};

template <int MT>
struct QkvLaunch {
  template <GemvMapping G, typename KV>
  static void launch(int M, const QkvKernelArgs& p, const float* x, Stream stream) {
    const int64_t units = int64_t{p.n_heads + 2 * p.n_kv_heads} * (p.head_dim / 2);
    const int team = team_size(G, p.k);
    qkv_kernel<G, MT, KV>
        <<<grid_for(units, team, M, MT), 32 * kWarpsPerBlock, 0, stream>>>(p, x, M, team);
  }
  template <GemvMapping G>
  static void go(int M, const QkvKernelArgs& p, DType kv_type, const float* x, Stream stream) {
    if (kv_type == DType::F32) return launch<G, float>(M, p, x, stream);
    launch<G, __half>(M, p, x, stream);
  }
};

void check_matrix(const DeviceMatrix& W, const char* what, GemvMapping mapping) {
  if (!cuda_supports(W.layout.type))
    raise_error(std::string(what) + ": no kernel for this weight type");
  if (mapping == GemvMapping::Lanes && !planes_aligned(W.layout, W.data))
    raise_error(std::string(what) + ": the matrix's planes are not aligned for 16-byte loads");
}

}  // namespace

void gemm_pairs(const DeviceMatrix& W, const float* x, int M, float* y, int64_t ldy, Stream stream,
                GemvMapping mapping) {
  if (M < 1) return;
  if (ldy < W.layout.n) raise_error("cuda::gemm_pairs: ldy is less than the matrix's rows");
  check_matrix(W, "cuda::gemm_pairs", mapping);
  by_tile<PairsLaunch>(M, mapping, W, x, y, ldy, stream);
  check_launch("cuda::gemm_pairs");
}

void gate_up_swiglu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x, int M,
                    float* out, Stream stream, GemvMapping mapping) {
  if (M < 1) return;
  if (gate.layout.k != up.layout.k || gate.layout.n != up.layout.n)
    raise_error("cuda::gate_up_swiglu: gate and up must have the same shape");
  check_matrix(gate, "cuda::gate_up_swiglu", mapping);
  check_matrix(up, "cuda::gate_up_swiglu", mapping);
  by_tile<GateUpLaunch>(M, mapping, gate, up, x, out, stream);
  check_launch("cuda::gate_up_swiglu");
}

void qkv_rope_store(const QkvStep& s, const PagedKV& kv, const float* x, int M, float* q_out,
                    Stream stream, GemvMapping mapping) {
  if (M < 1) return;
  if (s.head_dim % 2 != 0) raise_error("cuda::qkv_rope_store: head_dim must be even");
  if (kv.block_size < 1) raise_error("cuda::qkv_rope_store: block size must be at least 1");
  if (kv.type != DType::F32 && kv.type != DType::F16)
    raise_error("cuda::qkv_rope_store: the KV cache must be F32 or F16");
  const int64_t d = s.wq->layout.k;
  if (s.wk->layout.k != d || s.wv->layout.k != d ||
      s.wq->layout.n != int64_t{s.n_heads} * s.head_dim ||
      s.wk->layout.n != int64_t{s.n_kv_heads} * s.head_dim || s.wv->layout.n != s.wk->layout.n)
    raise_error("cuda::qkv_rope_store: Q, K and V do not match the head sizes");
  check_matrix(*s.wq, "cuda::qkv_rope_store", mapping);
  check_matrix(*s.wk, "cuda::qkv_rope_store", mapping);
  check_matrix(*s.wv, "cuda::qkv_rope_store", mapping);
  QkvKernelArgs p;
  p.wq = column(*s.wq);
  p.wk = column(*s.wk);
  p.wv = column(*s.wv);
  p.bq = s.bq;
  p.bk = s.bk;
  p.bv = s.bv;
  p.k = d;
  p.n_heads = s.n_heads;
  p.n_kv_heads = s.n_kv_heads;
  p.head_dim = s.head_dim;
  p.neox = s.style == kernels::RopeStyle::NeoX;
  p.cos = s.cos;
  p.sin = s.sin;
  p.q_out = q_out;
  p.seq = s.seq;
  p.kv_pos = s.kv_pos;
  p.block_tables = s.block_tables;
  p.table_stride = s.table_stride;
  p.block_size = kv.block_size;
  p.k_pool = kv.k_pool;
  p.v_pool = kv.v_pool;
  by_tile<QkvLaunch>(M, mapping, p, kv.type, x, stream);
  check_launch("cuda::qkv_rope_store");
}

}  // namespace tandem::cuda
