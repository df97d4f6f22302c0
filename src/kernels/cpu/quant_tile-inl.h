// The per-row arithmetic shared by every quantized weight type, in two forms,
// included by matmul_kquant.cpp and matmul_legacy.cpp once per Highway target
// (hence the toggling guard instead of #pragma once).
//
// Every weight type is decoded, 256 elements (one activation chunk, see
// activations.h) at a time, into the same form: an unsigned code per element in
// the chunk layout of the activations, and per 16-element group g a float scale
// a[g] and offset b[g] such that the group contributes
//   dx[g] * (a[g] * sum(u * q_x) - b[g] * sum(q_x))
// to the dot product. sum(u * q_x) is an exact integer (4 vpdpbusd per chunk
// leave group g's in lane g); the float part is a multiply, two FMAs per 16
// groups and row. A row's arithmetic never depends on other rows, and its
// summation order only on K and the target's vector width.
//
// - AVX3_DL (AVX-512 VNNI, Zen 4, Ice Lake): the type's decoder unpacks a chunk
//   straight into registers (4 zmm of codes, a and b), and TileColumns applies
//   it to a tile of up to kMaxTile activation rows whose accumulators stay in
//   registers across the whole weight row (tiles of one or two rows take two
//   columns at a time, for independent work). The weights are prefetched ahead
//   of use, into L2 or, where one tile reads them once, non-temporally; a legacy
//   row's last partial chunk of at most 4 blocks runs at half width.
// - Every other SIMD target: the weight row is unpacked into an L1 buffer in the
//   same form (UnpackedRow) and each activation row takes its dot product with it
//   (DotUnpacked), lane-exact integer dot products from simd_dot-inl.h.
#if defined(TANDEM_KERNELS_CPU_QUANT_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TANDEM_KERNELS_CPU_QUANT_TILE_INL_H_
#undef TANDEM_KERNELS_CPU_QUANT_TILE_INL_H_
#else
#define TANDEM_KERNELS_CPU_QUANT_TILE_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/matmul_chunk.h"
#include "kernels/cpu/simd_dot-inl.h"
#include "kernels/cpu/worker_scratch.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL  // see hwy_targets.h
#pragma GCC target("avx512vnni")
#endif
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR

// Moves element 16j + 4k + b of a natural-order chunk of codes to 64k + 4j + b.
HWY_INLINE void ToChunkLayout(const uint8_t* natural, uint8_t* chunk) {
  for (int j = 0; j < kGroupsPerChunk; ++j)
    for (int k = 0; k < 4; ++k) std::memcpy(chunk + 64 * k + 4 * j, natural + 16 * j + 4 * k, 4);
}

// ---------------------------------------------------------------------------
// Portable form: one weight row unpacked into the thread's UnpackedRow
// (worker_scratch.h), reused across the columns of a chunk.

HWY_INLINE float DotUnpacked(const UnpackedRow& w, const QActs& x, int m) {
  const hn::CappedTag<int32_t, kGroupsPerChunk> di32;  // a chunk's groups: 1, 2 or 4 vectors
  const hn::Repartition<uint8_t, decltype(di32)> du8;
  const hn::Repartition<int8_t, decltype(di32)> di8;
  const hn::Rebind<float, decltype(di32)> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(di32));
  const int8_t* xq = x.row_q(m);
  const float* xs = x.row_gsum(m);
  const float* xd = x.row_gd(m);
  auto acc = hn::Zero(df);
  for (int64_t e0 = 0; e0 < x.Kp; e0 += kChunk) {
    for (int64_t j = 0; j < kGroupsPerChunk; j += N) {
      auto p = hn::Zero(di32);
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t off = e0 + 64 * k + 4 * j;
        p = DotU8S8(du8, p, hn::LoadU(du8, &w.codes[off]), hn::LoadU(di8, xq + off));
      }
      const int64_t g = e0 / kGroup + j;
      auto t = hn::Mul(hn::ConvertTo(df, p), hn::LoadU(df, &w.a[g]));
      t = hn::NegMulAdd(hn::LoadU(df, &w.b[g]), hn::LoadU(df, xs + g), t);
      acc = hn::MulAdd(t, hn::LoadU(df, xd + g), acc);
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

// unpack(row_ptr, UnpackedRow&) fills the whole row; every activation row then
// takes its dot product with it.
template <class Unpack>
HWY_INLINE void PortableColumns(const MatmulChunk& c, const Unpack& unpack) {
  UnpackedRow& row = c.scratch->unpacked;
  row.resize(c.acts->Kp);
  for (int64_t n = c.n0; n < c.n1; ++n) {
    unpack(c.w + n * c.row_bytes, row);
    for (int m = c.m0; m < c.m1; ++m) c.y[m * c.ldy + n] = DotUnpacked(row, *c.acts, m);
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// ---------------------------------------------------------------------------
// Register form (AVX-512 VNNI).

// Raw x86 intrinsics of the register form, for instructions that Highway 1.0.3
// cannot express: TileColumns' and those that the decoders of matmul_kquant.cpp
// and matmul_legacy.cpp share (each of those files gathers its own near its
// top; vpdpbusd and prefetcht1 are in simd_dot-inl.h).
//
// vpermt2d, lanes idx[i] of the 32 dwords lo:hi: Highway 1.0.3 has no two-table
// lane permute (its TableLookupLanes reads one vector).
HWY_INLINE hn::Vec512<uint32_t> TwoTablesLookupLanes32(hn::Vec512<uint32_t> lo,
                                                       hn::Vec512<uint32_t> idx,
                                                       hn::Vec512<uint32_t> hi) {
  return hn::Vec512<uint32_t>{_mm512_permutex2var_epi32(lo.raw, idx.raw, hi.raw)};
}

// The sum of the 16 lanes as a scalar (a shuffle-and-add sequence): Highway
// 1.0.3's SumOfLanes broadcasts the sum back into a vector, a vbroadcastss per
// result that GCC keeps even when only lane 0 is read.
HWY_INLINE float ReduceSum(hn::Vec512<float> v) { return _mm512_reduce_add_ps(v.raw); }

// The vectors of the register form: codes are bytes (vpdpbusd's unsigned
// operand), activations signed bytes; a chunk's 16 groups are the 16 lanes of
// i32/u32/f32 vectors. A HalfRegs tail uses the 256-bit halves of these.
using DU8 = hn::ScalableTag<uint8_t>;
using DI8 = hn::ScalableTag<int8_t>;
using DU16 = hn::ScalableTag<uint16_t>;
using DU32 = hn::ScalableTag<uint32_t>;
using DI32 = hn::ScalableTag<int32_t>;
using DU64 = hn::ScalableTag<uint64_t>;
using DF = hn::ScalableTag<float>;
static_assert(sizeof(hn::Vec<DF>) == 64, "AVX3_DL vectors are 512 bits");

// One decoded chunk of a weight row: codes of granule k of every group in c[k]
// (lane g = group g), and the groups' a and b.
struct ChunkRegs {
  hn::Vec<DU8> c[4];
  hn::Vec<DF> a, b;
};

// The same for a last chunk of at most 4 legacy blocks (groups 0-7): 256-bit
// vectors, half the work of a full chunk.
struct HalfRegs {
  hn::Vec<hn::Half<DU8>> c[4];
  hn::Vec<hn::Half<DF>> a, b;
};

// A weight row in chunks: `full` whole ones, then (legacy types) a last chunk of
// `tail` blocks (0: none).
struct RowShape {
  int64_t full;
  int tail;
};

constexpr int kMaxTile = 8;        // activation rows per register tile
constexpr int kPairedRows = 2;     // tiles of at most this many rows take two columns at a time
constexpr int kBlocksPerHalf = 4;  // legacy blocks that a HalfRegs tail holds

// 16 u32 lanes from f(lane).
template <class F>
HWY_INLINE hn::Vec<DU32> LanesU32(F f) {
  alignas(64) uint32_t v[16];
  for (int i = 0; i < 16; ++i) v[i] = static_cast<uint32_t>(f(i));
  return hn::Load(DU32(), v);
}
template <class F>
HWY_INLINE hn::Vec<DF> LanesF32(F f) {
  alignas(64) float v[16];
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(f(i));
  return hn::Load(DF(), v);
}

// RowSteps for a HalfRegs tail (one column): its groups' share, added to lanes
// 0-7 of acc.
HWY_INLINE hn::Vec<DF> RowStepHalf(const HalfRegs& w, const int8_t* q, const float* gsum,
                                   const float* gd, hn::Vec<DF> acc) {
  const hn::Half<DU8> du8;
  const hn::Half<DI8> di8;
  const hn::Half<DI32> di32;
  const hn::Half<DF> df;
  const auto zero = hn::Zero(di32);
  auto p0 = DotU8S8(du8, zero, w.c[0], hn::LoadU(di8, q));
  auto p1 = DotU8S8(du8, zero, w.c[2], hn::LoadU(di8, q + 128));
  p0 = DotU8S8(du8, p0, w.c[1], hn::LoadU(di8, q + 64));
  p1 = DotU8S8(du8, p1, w.c[3], hn::LoadU(di8, q + 192));
  auto t = hn::Mul(hn::ConvertTo(df, hn::Add(p0, p1)), w.a);
  t = hn::NegMulAdd(w.b, hn::LoadU(df, gsum), t);
  return hn::Add(acc, hn::ZeroExtendVector(DF(), hn::Mul(t, hn::LoadU(df, gd))));
}

// One activation row's share of one decoded chunk of C columns: the same
// arithmetic for every tile shape. Each activation vector is loaded once for the
// C columns, and only one is live at a time (register pressure decides the speed
// of tiles of many rows). Two dot-product chains of two per column halve the
// latency (integer sums, so the grouping cannot change the result).
template <int C, bool kChunkScale, class Acc>
HWY_INLINE void RowSteps(const std::array<ChunkRegs, C>& w, const int8_t* q, const float* gsum,
                         const float* gd, Acc& acc, int r) {
  const DU8 du8;
  const DI8 di8;
  const DF df;
  const auto zero = hn::Zero(DI32());
  std::array<hn::Vec<DI32>, C> p0, p1;
  auto x = hn::LoadU(di8, q);
#pragma GCC unroll 2
  for (int j = 0; j < C; ++j) p0[j] = DotU8S8(du8, zero, w[j].c[0], x);
  x = hn::LoadU(di8, q + 128);
#pragma GCC unroll 2
  for (int j = 0; j < C; ++j) p1[j] = DotU8S8(du8, zero, w[j].c[2], x);
  x = hn::LoadU(di8, q + 64);
#pragma GCC unroll 2
  for (int j = 0; j < C; ++j) p0[j] = DotU8S8(du8, p0[j], w[j].c[1], x);
  x = hn::LoadU(di8, q + 192);
#pragma GCC unroll 2
  for (int j = 0; j < C; ++j) p1[j] = DotU8S8(du8, p1[j], w[j].c[3], x);
  const auto s = hn::LoadU(df, gsum);
  const auto d = kChunkScale ? hn::Set(df, *gd) : hn::LoadU(df, gd);
#pragma GCC unroll 2
  for (int j = 0; j < C; ++j) {
    auto t = hn::Mul(hn::ConvertTo(df, hn::Add(p0[j], p1[j])), w[j].a);
    t = hn::NegMulAdd(w[j].b, s, t);
    acc[j][r] = hn::MulAdd(t, d, acc[j][r]);
  }
}

// Columns [n0, n1) (a multiple of C of them, C at a time so that each activation
// row is loaded once for C columns) for activation rows m0 .. m0 + R - 1.
// A decoder Dec (one per weight type, constants only) provides
//   kChunkBytes   weight bytes per chunk,
//   kChunkScale   whether the activations have one scale per chunk (K-quants),
//   kHasTail      whether a row may end in a partial chunk (legacy types),
//   dec(row, ch)  the ChunkRegs of a row's whole chunk ch, and with kHasTail
//   dec.Masked(row, ch, tail), dec.Half(row, ch, tail)  those of a last chunk of
//                 `tail` blocks (5-7 at full width, 1-4 at half width).
template <int R, int C, class Dec>
HWY_NOINLINE void TileColumns(const Dec& dec, RowShape shape, const MatmulChunk& c, int64_t n0,
                              int64_t n1, int m0) {
  const QActs& x = *c.acts;
  std::array<const int8_t*, R> xq;
  std::array<const float*, R> xs, xd;
  for (int r = 0; r < R; ++r) {
    xq[r] = x.row_q(m0 + r);
    xs[r] = x.row_gsum(m0 + r);
    xd[r] = x.row_gd(m0 + r);
  }
  // Software prefetch of the weight row `ahead` columns on, the lines
  // that start within each chunk: neither the out-of-order window nor the
  // hardware prefetchers keep enough cache misses in flight to stream the
  // weights from DRAM at full speed (docs/decisions.md, "Software prefetch").
  const int64_t distance = c.prefetch_bytes;  // KernelConfig::prefetch_bytes (0: off)
  const int64_t ahead =
      distance == 0 ? 0 : std::max<int64_t>(C, (distance + c.row_bytes - 1) / c.row_bytes);
  const int64_t prefetch_stride = static_cast<int64_t>(ahead * c.row_bytes);
  // Non-temporally where this tile is the chunk's only one (RegisterColumns), so
  // that no other tile reads the weights again (MatmulChunk::non_temporal).
  const bool non_temporal = c.non_temporal && c.m1 - c.m0 <= kMaxTile;
  // (The lambdas must inline: out of line they would take the accumulators through
  // memory.)
  auto prefetch = [&](const uint8_t* row, int64_t from_byte, int64_t to_byte)
      __attribute__((always_inline)) {
    const uintptr_t from = reinterpret_cast<uintptr_t>(row + prefetch_stride + from_byte);
    const uintptr_t to = reinterpret_cast<uintptr_t>(row + prefetch_stride + to_byte);
    for (uintptr_t line = (from + 63) & ~uintptr_t{63}; line < to; line += 64)
      PrefetchStream(reinterpret_cast<const uint8_t*>(line), non_temporal);
  };
  // The steady state prefetches row n + ahead while working on row n: the first
  // `ahead` rows of the range are fetched up front.
  if (prefetch_stride > 0) {
    const uint8_t* first = c.w + n0 * c.row_bytes;
    const int64_t bytes = std::min(n1 - n0, ahead) * static_cast<int64_t>(c.row_bytes);
    for (int64_t off = 0; off < bytes; off += 64) PrefetchStream(first + off, non_temporal);
  }
  for (int64_t n = n0; n < n1; n += C) {
    std::array<const uint8_t*, C> w;
    const DF df;
    std::array<std::array<hn::Vec<DF>, R>, C> acc;
#pragma GCC unroll 2
    for (int j = 0; j < C; ++j) {
      w[j] = c.w + (n + j) * c.row_bytes;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[j][r] = hn::Zero(df);
    }
    // Whole chunks, then (legacy types) a last chunk of 5-7 blocks at full width
    // or of 1-4 blocks at half width.
    auto chunk = [&](int64_t ch, bool masked) __attribute__((always_inline)) {
      constexpr int64_t kBytes = static_cast<int64_t>(Dec::kChunkBytes);
      std::array<ChunkRegs, C> wc;
#pragma GCC unroll 2
      for (int j = 0; j < C; ++j) {
        if (prefetch_stride > 0)
          prefetch(w[j], ch * kBytes, masked ? c.row_bytes : (ch + 1) * kBytes);
        if constexpr (Dec::kHasTail) {
          wc[j] = masked ? dec.Masked(w[j], ch, shape.tail) : dec(w[j], ch);
        } else {
          wc[j] = dec(w[j], ch);
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        RowSteps<C, Dec::kChunkScale>(wc, xq[r] + ch * kChunk, xs[r] + ch * kGroupsPerChunk,
                                      xd[r] + ch * kGroupsPerChunk, acc, r);
    };
    for (int64_t ch = 0; ch < shape.full; ++ch) chunk(ch, false);
    if constexpr (!Dec::kHasTail) {
    } else if (shape.tail > kBlocksPerHalf) {
      chunk(shape.full, true);
    } else if (shape.tail > 0) {
      const int64_t ch = shape.full;
#pragma GCC unroll 2
      for (int j = 0; j < C; ++j) {
        if (prefetch_stride > 0) prefetch(w[j], ch * Dec::kChunkBytes, c.row_bytes);
        const HalfRegs wh = dec.Half(w[j], ch, shape.tail);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          acc[j][r] = RowStepHalf(wh, xq[r] + ch * kChunk, xs[r] + ch * kGroupsPerChunk,
                                  xd[r] + ch * kGroupsPerChunk, acc[j][r]);
      }
    }
#pragma GCC unroll 2
    for (int j = 0; j < C; ++j)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) c.y[(m0 + r) * c.ldy + n + j] = ReduceSum(acc[j][r]);
  }
}

// Column pairs (for tiles of up to kPairedRows rows), then the odd one alone.
template <int R, class Dec>
HWY_INLINE void TileRows(const Dec& dec, RowShape shape, const MatmulChunk& c, int64_t n0,
                         int64_t n1, int m0) {
  constexpr int kPair = R <= kPairedRows ? 2 : 1;
  const int64_t paired = n0 + (n1 - n0) / kPair * kPair;
  if (paired > n0) TileColumns<R, kPair>(dec, shape, c, n0, paired, m0);
  if (paired < n1) TileColumns<R, 1>(dec, shape, c, paired, n1, m0);
}

template <class Dec>
HWY_INLINE void TileDispatch(const Dec& dec, RowShape shape, const MatmulChunk& c, int64_t n0,
                             int64_t n1, int m0, int rows) {
  switch (rows) {
    case 1:
      return TileRows<1>(dec, shape, c, n0, n1, m0);
    case 2:
      return TileRows<2>(dec, shape, c, n0, n1, m0);
    case 3:
      return TileRows<3>(dec, shape, c, n0, n1, m0);
    case 4:
      return TileRows<4>(dec, shape, c, n0, n1, m0);
    case 5:
      return TileRows<5>(dec, shape, c, n0, n1, m0);
    case 6:
      return TileRows<6>(dec, shape, c, n0, n1, m0);
    case 7:
      return TileRows<7>(dec, shape, c, n0, n1, m0);
    default:
      return TileRows<8>(dec, shape, c, n0, n1, m0);
  }
}

// All rows of the chunk: one tile when they fit, else (prefill) blocks of
// columns whose weights stay in L2 (about 64 KiB) while every tile of rows takes
// them in turn; a block of columns against one tile of rows keeps that tile's
// activations in L1/L2 instead of streaming all rows once per column.
// The decoders hold only constants (permute indices, masks), built once.
template <class Dec>
HWY_INLINE void RegisterColumns(const MatmulChunk& c, RowShape shape) {
  static const Dec dec;
  const int M = c.m1 - c.m0;
  if (M <= kMaxTile) return TileDispatch(dec, shape, c, c.n0, c.n1, c.m0, M);
  const int64_t block =
      std::max<int64_t>(2, (64 << 10) / static_cast<int64_t>(c.row_bytes)) / 2 * 2;
  for (int64_t n = c.n0; n < c.n1; n += block)
    for (int m = c.m0; m < c.m1; m += kMaxTile)
      TileDispatch(dec, shape, c, n, std::min(n + block, c.n1), m, std::min(kMaxTile, c.m1 - m));
}
#endif  // HWY_TARGET == HWY_AVX3_DL

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
