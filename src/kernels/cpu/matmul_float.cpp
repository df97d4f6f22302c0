// Matmul for float weights (F32, F16, BF16) against float activations. Each
// weight vector is widened to F32 in registers once and multiplied into the
// accumulators of a tile of up to kFloatTile activation rows (one accumulator per
// row, so a row's summation order depends only on K and the vector width);
// the last K % lanes elements are added in scalar code after the reduction.
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_float.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <type_traits>

#include "kernels/cpu/matmul_chunk.h"
#include "quant/quants.h"

HWY_BEFORE_NAMESPACE();
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// W (F32, or F16/BF16 bits) at i as floats.
template <typename W, class DF>
HWY_INLINE hn::Vec<DF> LoadWidened(DF df, const W* w) {
  if constexpr (std::is_same_v<W, float>) {
    return hn::LoadU(df, w);
  } else {
    return hn::PromoteTo(df, hn::LoadU(hn::Rebind<W, DF>(), w));
  }
}

template <typename W>
HWY_INLINE float ScalarWidened(const W& w) {
  if constexpr (std::is_same_v<W, float>) {
    return w;
  } else {
    uint16_t bits;
    __builtin_memcpy(&bits, &w, 2);
    return std::is_same_v<W, hwy::float16_t> ? f16_to_f32(bits) : bf16_to_f32(bits);
  }
}

template <typename W>
HWY_INLINE float Tail(const W* w, const float* x, int64_t from, int64_t K, float sum) {
  for (int64_t i = from; i < K; ++i) sum += ScalarWidened(w[i]) * x[i];
  return sum;
}

#if !HWY_HAVE_SCALABLE
constexpr int kFloatTile = 8;

// Columns [n0, n1) for activation rows m0 .. m0 + R - 1.
template <int R, typename W>
HWY_NOINLINE void FloatTile(const MatmulChunk& c, int64_t n0, int64_t n1, int m0) {
  const hn::ScalableTag<float> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t K = c.K, Kv = K / L * L;
  for (int64_t n = n0; n < n1; ++n) {
    const W* w = reinterpret_cast<const W*>(c.w + n * c.row_bytes);
    std::array<hn::Vec<decltype(df)>, R> acc;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = hn::Zero(df);
    for (int64_t i = 0; i < Kv; i += L) {
      const auto wv = LoadWidened(df, w + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        acc[r] = hn::MulAdd(wv, hn::LoadU(df, c.x + (m0 + r) * K + i), acc[r]);
    }
    for (int r = 0; r < R; ++r) {
      const float sum = hn::GetLane(hn::SumOfLanes(df, acc[r]));
      c.y[(m0 + r) * c.ldy + n] = Tail(w, c.x + (m0 + r) * K, Kv, K, sum);
    }
  }
}

template <typename W>
void FloatRows(const MatmulChunk& c, int64_t n0, int64_t n1, int m0, int rows) {
  switch (rows) {
    case 1:
      return FloatTile<1, W>(c, n0, n1, m0);
    case 2:
      return FloatTile<2, W>(c, n0, n1, m0);
    case 3:
      return FloatTile<3, W>(c, n0, n1, m0);
    case 4:
      return FloatTile<4, W>(c, n0, n1, m0);
    case 5:
      return FloatTile<5, W>(c, n0, n1, m0);
    case 6:
      return FloatTile<6, W>(c, n0, n1, m0);
    case 7:
      return FloatTile<7, W>(c, n0, n1, m0);
    default:
      return FloatTile<8, W>(c, n0, n1, m0);
  }
}

// One tile when the rows fit, else column by column so every tile reuses the
// weight row from L1.
template <typename W>
void FloatColumns(const MatmulChunk& c) {
  const int M = c.m1 - c.m0;
  if (M <= kFloatTile) return FloatRows<W>(c, c.n0, c.n1, c.m0, M);
  for (int64_t n = c.n0; n < c.n1; ++n)
    for (int m = c.m0; m < c.m1; m += kFloatTile)
      FloatRows<W>(c, n, n + 1, m, std::min(kFloatTile, c.m1 - m));
}
#else
// Sizeless vectors cannot live in arrays: one row at a time.
template <typename W>
void FloatColumns(const MatmulChunk& c) {
  const hn::ScalableTag<float> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  const int64_t K = c.K, Kv = K / L * L;
  for (int64_t n = c.n0; n < c.n1; ++n) {
    const W* w = reinterpret_cast<const W*>(c.w + n * c.row_bytes);
    for (int m = c.m0; m < c.m1; ++m) {
      auto acc = hn::Zero(df);
      for (int64_t i = 0; i < Kv; i += L)
        acc = hn::MulAdd(LoadWidened(df, w + i), hn::LoadU(df, c.x + m * K + i), acc);
      c.y[m * c.ldy + n] = Tail(w, c.x + m * K, Kv, K, hn::GetLane(hn::SumOfLanes(df, acc)));
    }
  }
}
#endif  // !HWY_HAVE_SCALABLE

void FloatChunk(const MatmulChunk& c) {
  if (c.type == DType::F32) return FloatColumns<float>(c);
  if (c.type == DType::F16) return FloatColumns<hwy::float16_t>(c);
  FloatColumns<hwy::bfloat16_t>(c);
}

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/target_kernels.h"

namespace tandem::kernels::cpu {
HWY_EXPORT(FloatChunk);
void resolve_matmul_float(size_t index, TargetKernels& k) {
  k.matmul_float = dispatch_entry(HWY_DISPATCH_TABLE(FloatChunk), index);
}
}  // namespace tandem::kernels::cpu
#endif
