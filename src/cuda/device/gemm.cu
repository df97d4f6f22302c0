// Quantized matrix times a few activation rows (cuda_kernels.h: gemm).
//
// One warp computes one output column n (weight row n) for a tile of up to MT
// activation rows. Lane l takes the groups l, l + 32, l + 64, ... of the weight
// row (32 elements each, decoded by group_decode.h into registers) and for each
// tile row adds the 32 products to its own accumulator in element order with
// fmaf; the warp then sums its lanes in an xor butterfly. The decode GEMV
// (M = 1) is the tile of one row.
//
// Batch invariance: the operations that produce y[m, n] are the same sequence
// for every M and every tile size: which lane takes which group depends on K
// alone, each row's accumulator sees the same fmaf chain, and the butterfly is
// fixed. Rows only share the decoded weights, never a reduction. (-fmad=false
// keeps nvcc from fusing anything the code does not fuse.)
//
// GemvMapping::Lanes: gemm_lanes_kernel, a team of 16 or 32 lanes per column
// reading 16-byte chunks (device/gemv_lanes.cuh says the rule and why), in
// tiles of 1 or 8 rows.
#include <cuda_runtime.h>

#include "cuda/cuda_kernels.h"
#include "cuda/device/block_reduce.cuh"
#include "cuda/device/check.cuh"
#include "cuda/device/gemv_lanes.cuh"
#include "cuda/group_decode.h"

namespace tandem::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;  // output columns per thread block

template <DType T, int MT>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    gemm_kernel(WeightPlanes w, int64_t k, int64_t n, const float* __restrict__ x, int m,
                float* __restrict__ y, int64_t ldy) {
  const int lane = threadIdx.x % 32;
  const int64_t col = int64_t{blockIdx.x} * kWarpsPerBlock + threadIdx.x / 32;
  if (col >= n) return;  // the whole warp: col is the warp's
  const int m0 = blockIdx.y * MT;
  const int rows = min(MT, m - m0);
  float acc[MT];
  for (int r = 0; r < MT; ++r) acc[r] = 0.0f;
  const int64_t groups = k / kGroup;
  for (int64_t g = lane; g < groups; g += 32) {
    float wv[kGroup];
    decode_group<T>(w, col, g, wv);
    for (int r = 0; r < MT; ++r) {
      if (r >= rows) break;
      const auto* xr = reinterpret_cast<const float4*>(x + (m0 + r) * k + g * kGroup);
      for (int q = 0; q < kGroup / 4; ++q) {
        const float4 v = xr[q];
        acc[r] = fmaf(wv[4 * q], v.x, acc[r]);
        acc[r] = fmaf(wv[4 * q + 1], v.y, acc[r]);
        acc[r] = fmaf(wv[4 * q + 2], v.z, acc[r]);
        acc[r] = fmaf(wv[4 * q + 3], v.w, acc[r]);
      }
    }
  }
  for (int r = 0; r < MT; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0 && r < rows) y[(m0 + r) * ldy + col] = sum;
  }
}

// The lanes mapping: team t.index computes column t.index.
template <DType T, int MT>
__global__ void __launch_bounds__(kLanesBlock)
    gemm_lanes_kernel(WeightPlanes w, int64_t k, int64_t n, const float* __restrict__ x, int m,
                      float* __restrict__ y, int64_t ldy, int team_size) {
  const Team t = make_team(team_size);
  if (t.index >= n) return;  // the whole team: the index is the team's
  const int m0 = blockIdx.y * MT;
  const int rows = min(MT, m - m0);
  const WeightPlanes planes[1] = {w};
  const int64_t cols[1] = {t.index};
  float s[1][MT];
  lanes_sums<T, 1, MT>(t, planes, cols, k, x, m0, rows, s);
  if (t.lane != 0) return;
  for (int r = 0; r < rows; ++r) y[(m0 + r) * ldy + t.index] = s[0][r];
}

template <DType T, int MT>
void launch_tile(const DeviceMatrix& W, const float* x, int M, float* y, int64_t ldy,
                 Stream stream) {
  const WeightLayout& l = W.layout;
  const dim3 grid(static_cast<unsigned>((l.n + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>((M + MT - 1) / MT));
  gemm_kernel<T, MT>
      <<<grid, 32 * kWarpsPerBlock, 0, stream>>>(weight_planes(l, W.data), l.k, l.n, x, M, y, ldy);
}

template <DType T, int MT>
void launch_lanes_tile(const DeviceMatrix& W, const float* x, int M, float* y, int64_t ldy,
                       Stream stream) {
  const WeightLayout& l = W.layout;
  const int team = lanes_per_column(l.k);
  const dim3 grid(lanes_blocks(l.n, team), static_cast<unsigned>((M + MT - 1) / MT));
  gemm_lanes_kernel<T, MT>
      <<<grid, kLanesBlock, 0, stream>>>(weight_planes(l, W.data), l.k, l.n, x, M, y, ldy, team);
}

// The tile: the whole call up to 4 rows, else tiles of 8 (the weights are read
// once per tile; the partial last tile masks its missing rows).
//
// The lanes kernels come in two tiles only, 1 row (the decode GEMV) and 8
// (anything more, the missing rows masked): each tile is a copy of every
// kernel, and two more made the binaries too large for the GPU bundle's 64 MiB.
template <DType T>
void launch(const DeviceMatrix& W, const float* x, int M, float* y, int64_t ldy, Stream stream,
            GemvMapping mapping) {
  if (mapping == GemvMapping::Lanes) {
    if (M == 1) return launch_lanes_tile<T, 1>(W, x, M, y, ldy, stream);
    return launch_lanes_tile<T, 8>(W, x, M, y, ldy, stream);
  }
  if (M == 1) {
    launch_tile<T, 1>(W, x, M, y, ldy, stream);
  } else if (M == 2) {
    launch_tile<T, 2>(W, x, M, y, ldy, stream);
  } else if (M <= 4) {
    launch_tile<T, 4>(W, x, M, y, ldy, stream);
  } else {
    launch_tile<T, 8>(W, x, M, y, ldy, stream);
  }
}

}  // namespace

void gemm(const DeviceMatrix& W, const float* x, int M, float* y, int64_t ldy, Stream stream,
          GemvMapping mapping) {
  if (M < 1 || M > kMaxGemmRows) raise_error("cuda::gemm: rows must be in [1, 64]");
  if (ldy < W.layout.n) raise_error("cuda::gemm: ldy is less than the matrix's rows");
  if (mapping == GemvMapping::Lanes && !planes_aligned(W.layout, W.data))
    raise_error("cuda::gemm: the matrix's planes are not aligned for 16-byte loads");
  switch (W.layout.type) {
    case DType::F32:
      launch<DType::F32>(W, x, M, y, ldy, stream, mapping);
      break;
    case DType::F16:
      launch<DType::F16>(W, x, M, y, ldy, stream, mapping);
      break;
    case DType::BF16:
      launch<DType::BF16>(W, x, M, y, ldy, stream, mapping);
      break;
    case DType::Q4_0:
      launch<DType::Q4_0>(W, x, M, y, ldy, stream, mapping);
      break;
    case DType::Q4_1:
      launch<DType::Q4_1>(W, x, M, y, ldy, stream, mapping);
      break;
    case DType::Q5_0:
      launch<DType::Q5_0>(W, x, M, y, ldy, stream, mapping);
      break;
    case DType::Q8_0:
      launch<DType::Q8_0>(W, x, M, y, ldy, stream, mapping);
      break;
    case DType::Q4_K:
      launch<DType::Q4_K>(W, x, M, y, ldy, stream, mapping);
      break;
    case DType::Q5_K:
      launch<DType::Q5_K>(W, x, M, y, ldy, stream, mapping);
      break;
    case DType::Q6_K:
      launch<DType::Q6_K>(W, x, M, y, ldy, stream, mapping);
      break;
    default:
      raise_error("cuda::gemm: no kernel for this weight type");
  }
  check_launch("cuda::gemm");
}

}  // namespace tandem::cuda
