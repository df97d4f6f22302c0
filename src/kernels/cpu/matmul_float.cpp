// Matmul for float weights (F32, F16, BF16) against float activations: each
// weight row is widened to F32 once (F32 rows are used in place) and dotted with
// every activation row of the tile.
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_float.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <type_traits>
#include <vector>

#include "kernels/cpu/matmul_chunk.h"
#include "kernels/quants.h"

HWY_BEFORE_NAMESPACE();
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Widen n halves (F16 or BF16 bits) to floats.
template <typename Half>
HWY_INLINE void Widen(const uint16_t* src, int64_t n, float* dst) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<Half, decltype(df)> dh;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + L <= n; i += L)
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const Half*>(src + i))), df,
               dst + i);
  for (; i < n; ++i)
    dst[i] = std::is_same_v<Half, hwy::float16_t> ? f16_to_f32(src[i]) : bf16_to_f32(src[i]);
}

// Dot product of n floats. Four vector accumulators, then the scalar tail; the
// order depends only on n.
HWY_INLINE float Dot(const float* w, const float* x, int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    a0 = hn::MulAdd(hn::LoadU(df, w + i), hn::LoadU(df, x + i), a0);
    a1 = hn::MulAdd(hn::LoadU(df, w + i + L), hn::LoadU(df, x + i + L), a1);
    a2 = hn::MulAdd(hn::LoadU(df, w + i + 2 * L), hn::LoadU(df, x + i + 2 * L), a2);
    a3 = hn::MulAdd(hn::LoadU(df, w + i + 3 * L), hn::LoadU(df, x + i + 3 * L), a3);
  }
  for (; i + L <= n; i += L) a0 = hn::MulAdd(hn::LoadU(df, w + i), hn::LoadU(df, x + i), a0);
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

void FloatChunk(const MatmulChunk& c) {
  static thread_local std::vector<float> buf;
  buf.resize(c.K);
  for (int64_t n = c.n0; n < c.n1; ++n) {
    const uint8_t* src = c.w + n * c.row_bytes;
    const float* w = buf.data();
    if (c.type == DType::F32) {
      w = reinterpret_cast<const float*>(src);
    } else if (c.type == DType::F16) {
      Widen<hwy::float16_t>(reinterpret_cast<const uint16_t*>(src), c.K, buf.data());
    } else {
      Widen<hwy::bfloat16_t>(reinterpret_cast<const uint16_t*>(src), c.K, buf.data());
    }
    for (int m = c.m0; m < c.m1; ++m) c.y[m * c.ldy + n] = Dot(w, c.x + m * c.K, c.K);
  }
}

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tandem::kernels::cpu {
HWY_EXPORT(FloatChunk);
void matmul_chunk_float(const MatmulChunk& c) { HWY_DYNAMIC_DISPATCH(FloatChunk)(c); }
}  // namespace tandem::kernels::cpu
#endif
