// The lanes mapping of the matmuls (cuda_kernels.h: GemvMapping::Lanes): the
// sums that gemm's lanes kernel (gemm.cu) and the fused launches
// (gemm_fused.cu) share.
//
// Rule. A team of lanes_per_column(K) lanes (16 or 32: K alone) computes one
// output column (gemm) or one pair of columns (the fused launches) for a tile
// of MT activation rows (1, the decode GEMV, or 8; a partial tile masks its
// missing rows). Lane l of a team of T takes the 16-byte chunks
// l, l + T, l + 2 T, ... of the weight row's main plane (chunk_decode.h), in
// that order, and for each tile row adds each chunk's products to one
// accumulator with fmaf, in the chunk's element order (ChunkShape). The team
// then sums its lanes in an xor butterfly (offsets T / 2, ..., 1).
//
// Why. Consecutive lanes load consecutive 16-byte chunks, one uint4 load each,
// so a warp's load instruction covers whole 32-byte sectors (512 contiguous
// bytes for a team of 32, two runs of 256 for two teams of 16), where the
// groups mapping's 4-byte loads lie 16 to 64 bytes apart. A team of 16 where a
// team of 32 would leave half its last pass idle (K = 1536, 4-bit: 48 chunks
// are 3 passes of 16 lanes, not 2 of 32); two teams then share a warp, and the
// warps a block of 128 threads. In the decode GEMV a lane loads
// kLoadsInFlight chunks (of its columns together) before it decodes any, so
// that it has several 16-byte loads in flight, not one.
//
// Batch invariance: which lane takes which chunk depends on K and the type
// alone; a row's accumulator sees the same chain of fmaf whatever the tile or
// M (rows share only the decoded weights, never a reduction); the butterfly is
// fixed. A fused launch's column is summed exactly as gemm sums it: the same
// team size (K alone), chunks and order. Two columns of one type share the
// activation loads; columns of two types (gate_up_swiglu's may differ) are
// summed one after the other, each with its own loads.
#pragma once
#include <cuda_runtime.h>

#include "cuda/chunk_decode.h"
#include "cuda/device/block_reduce.cuh"
#include "cuda/weight_type.h"

namespace tandem::cuda {

constexpr int kLoadsInFlight = 4;  // chunks a lane loads before decoding (all columns together)
constexpr int kLanesBlock = 128;   // threads per block of the lanes kernels

// The lanes that compute one unit of work together: `size` consecutive lanes
// of a warp (a power of two up to 32). index: the unit, counting the teams of
// the grid in thread order.
struct Team {
  int size;
  int lane;       // 0 .. size - 1
  unsigned mask;  // the team's lanes in the warp: its shuffles involve only them
  int64_t index;
};

__device__ __forceinline__ Team make_team(int size) {
  Team t;
  t.size = size;
  t.lane = static_cast<int>(threadIdx.x) % size;
  const int first = static_cast<int>(threadIdx.x) % 32 / size * size;
  t.mask = size == 32 ? kFullMask : ((1u << size) - 1) << first;
  t.index = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / size;
  return t;
}

// The team's sum, in each of its lanes (a team of 32: warp_sum).
__device__ __forceinline__ float team_sum(float v, const Team& t) {
  for (int o = t.size / 2; o > 0; o /= 2) v += __shfl_xor_sync(t.mask, v, o);
  return v;
}

// Blocks of kLanesBlock threads for `units` teams of `team` lanes.
inline unsigned lanes_blocks(int64_t units, int team) {
  const int64_t per_block = kLanesBlock / team;
  return static_cast<unsigned>((units + per_block - 1) / per_block);
}

// s[j][r]: the sums of columns col[j] of w[j] (j < NC, all of type T) for the
// rows m0 + r < m0 + rows, in every lane of the team. x: rows of k floats.
template <DType T, int NC, int MT>
__device__ __forceinline__ void lanes_sums(const Team& t, const WeightPlanes (&w)[NC],
                                           const int64_t (&col)[NC], int64_t k,
                                           const float* __restrict__ x, int m0, int rows,
                                           float (&s)[NC][MT]) {
  using Shape = ChunkShape<T>;
  // Chunks per column loaded at once: for the decode GEMV (MT = 1) a batch, so
  // that a lane has several loads in flight; for tiles of more rows one (their
  // products keep a lane busy between loads), as each chunk of a batch is a
  // copy of the decode and the products in the code, and a batch in every tile
  // made the binaries too large for the GPU bundle's 64 MiB.
  constexpr int kBatch = MT == 1 ? kLoadsInFlight / NC : 1;
  // Every loop over a compile-time count is unrolled by pragma: left to the
  // compiler's heuristics some were not, and the arrays they index (raw, wv,
  // acc) went to local memory (ptxas's stack frames showed it).
  float acc[NC][MT];
#pragma unroll
  for (int j = 0; j < NC; ++j)
#pragma unroll
    for (int r = 0; r < MT; ++r) acc[j][r] = 0.0f;
  const int64_t chunks = chunks_per_row<T>(k);
  for (int64_t c0 = t.lane; c0 < chunks; c0 += int64_t{kBatch} * t.size) {
    ChunkBytes raw[kBatch][NC] = {};
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t c = c0 + int64_t{u} * t.size;
      if (c >= chunks) break;
#pragma unroll
      for (int j = 0; j < NC; ++j) raw[u][j] = load_chunk<T>(w[j], col[j], c);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int64_t c = c0 + int64_t{u} * t.size;
      if (c >= chunks) break;
      float wv[NC][kMaxChunkElems];
#pragma unroll
      for (int j = 0; j < NC; ++j) decode_chunk<T>(raw[u][j], wv[j]);
      const int64_t first = Shape::first(c);
#pragma unroll
      for (int r = 0; r < MT; ++r) {
        if (r >= rows) break;
        const float* xr = x + (m0 + r) * k + first;
#pragma unroll
        for (int run = 0; run < Shape::kRuns; ++run) {
          const auto* xv = reinterpret_cast<const float4*>(xr + run * Shape::kRunStride);
#pragma unroll
          for (int q = 0; q < Shape::kRunLen / 4; ++q) {
            const float4 v = xv[q];
            const int e = run * Shape::kRunLen + 4 * q;
#pragma unroll
            for (int j = 0; j < NC; ++j) {
              acc[j][r] = fmaf(wv[j][e], v.x, acc[j][r]);
              acc[j][r] = fmaf(wv[j][e + 1], v.y, acc[j][r]);
              acc[j][r] = fmaf(wv[j][e + 2], v.z, acc[j][r]);
              acc[j][r] = fmaf(wv[j][e + 3], v.w, acc[j][r]);
            }
          }
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < NC; ++j)
#pragma unroll
    for (int r = 0; r < MT; ++r) s[j][r] = team_sum(acc[j][r], t);
}

// lanes_sums for a type known at run time (the same for the whole team).
template <int NC, int MT>
__device__ __forceinline__ void lanes_sums_any(DType type, const Team& t,
                                               const WeightPlanes (&w)[NC],
                                               const int64_t (&col)[NC], int64_t k,
                                               const float* __restrict__ x, int m0, int rows,
                                               float (&s)[NC][MT]) {
  with_weight_type(type, [&](auto tag) {
    lanes_sums<decltype(tag)::value, NC, MT>(t, w, col, k, x, m0, rows, s);
  });
}

}  // namespace tandem::cuda
