// Vectorised activation quantization (see activations.h for the layouts).
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantize_acts.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/activations.h"

HWY_BEFORE_NAMESPACE();
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Quantize n (a multiple of the vector length) floats with scale 1/id into q;
// returns the sum of the codes.
HWY_INLINE int32_t QuantizeSpan(const float* x, int n, float id, int8_t* q) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di32;
  const hn::Rebind<int8_t, decltype(df)> di8;
  const auto vid = hn::Set(df, id);
  auto sum = hn::Zero(di32);
  for (int i = 0; i < n; i += static_cast<int>(hn::Lanes(df))) {
    const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, x + i), vid));
    sum = hn::Add(sum, qi);
    hn::StoreU(hn::DemoteTo(di8, qi), di8, q + i);
  }
  return hn::GetLane(hn::SumOfLanes(di32, sum));
}

HWY_INLINE float AbsMax(const float* x, int n) {
  const hn::ScalableTag<float> df;
  auto m = hn::Zero(df);
  for (int i = 0; i < n; i += static_cast<int>(hn::Lanes(df)))
    m = hn::Max(m, hn::Abs(hn::LoadU(df, x + i)));
  return hn::GetLane(hn::MaxOfLanes(df, m));
}

void QuantizeQ8(const float* x, int M, int64_t K, Q8Acts* out) {
  for (int m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    int8_t* q = out->q.data() + m * out->Kp;
    float* d_lane = out->d_lane.data() + m * (out->Kp / 4);
    float* s = out->s.data() + m * out->nbp;
    for (int64_t b = 0; b < K / 32; ++b) {
      const float amax = AbsMax(xr + b * 32, 32);
      const float d = amax / 127.0f;
      const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
      const int32_t sum = QuantizeSpan(xr + b * 32, 32, id, q + b * 32);
      for (int l = 0; l < 8; ++l) d_lane[b * 8 + l] = d;
      s[b] = d * static_cast<float>(sum);
    }
  }
}

void QuantizeQ8K(const float* x, int M, int64_t K, Q8KActs* out) {
  for (int m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    int8_t* q = out->q.data() + m * K;
    float* d = out->d.data() + m * (K / 256);
    int16_t* bsum = out->bsum.data() + m * (K / 16);
    for (int64_t b = 0; b < K / 256; ++b) {
      const float amax = AbsMax(xr + b * 256, 256);
      d[b] = amax / 127.0f;
      const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int g = 0; g < 16; ++g) {
        const int64_t e = b * 256 + g * 16;
        bsum[e / 16] = static_cast<int16_t>(QuantizeSpan(xr + e, 16, id, q + e));
      }
    }
  }
}

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/error.h"

namespace tandem::kernels::cpu {

HWY_EXPORT(QuantizeQ8);
HWY_EXPORT(QuantizeQ8K);

void quantize_q8(const float* x, int M, int64_t K, Q8Acts& out) {
  check(K % 32 == 0, "quantize_q8: row length {} is not a multiple of 32", K);
  out.M = M;
  out.K = K;
  out.Kp = round_up(K, kRowAlign);
  out.nbp = round_up(out.Kp / 32, kMinAlign);
  // Padding must read as zeros (q = 0, d = 0, s = 0); resize keeps old values,
  // so clear the buffers first.
  out.q.assign(static_cast<size_t>(M) * out.Kp, 0);
  out.d_lane.assign(static_cast<size_t>(M) * out.Kp / 4, 0.0f);
  out.s.assign(static_cast<size_t>(M) * out.nbp, 0.0f);
  HWY_DYNAMIC_DISPATCH(QuantizeQ8)(x, M, K, &out);
}

void quantize_q8k(const float* x, int M, int64_t K, Q8KActs& out) {
  check(K % 256 == 0, "quantize_q8k: row length {} is not a multiple of 256", K);
  out.M = M;
  out.K = K;
  out.q.resize(static_cast<size_t>(M) * K);
  out.d.resize(static_cast<size_t>(M) * (K / 256));
  out.bsum.resize(static_cast<size_t>(M) * (K / 16));
  HWY_DYNAMIC_DISPATCH(QuantizeQ8K)(x, M, K, &out);
}

}  // namespace tandem::kernels::cpu
#endif
