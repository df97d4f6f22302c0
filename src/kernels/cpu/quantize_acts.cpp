// Vectorised activation quantization (see activations.h for the layout).
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantize_acts.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/activations.h"

HWY_BEFORE_NAMESPACE();
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::CappedTag<float, kGroup>;  // a group is a whole number of these

// Quantize the 16 floats of one group with scale 1/id into codes (natural
// order); returns the sum of the codes.
HWY_INLINE int32_t QuantizeGroup(const float* x, float id, int8_t* codes) {
  const DF df;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<int8_t, DF> di8;
  const auto vid = hn::Set(df, id);
  auto sum = hn::Zero(di32);
  for (int i = 0; i < kGroup; i += static_cast<int>(hn::Lanes(df))) {
    const auto qi = hn::NearestInt(hn::Mul(hn::LoadU(df, x + i), vid));
    sum = hn::Add(sum, qi);
    hn::StoreU(hn::DemoteTo(di8, qi), di8, codes + i);
  }
  return hn::GetLane(hn::SumOfLanes(di32, sum));
}

HWY_INLINE float AbsMax(const float* x, int n) {
  const DF df;
  auto m = hn::Zero(df);
  for (int i = 0; i < n; i += static_cast<int>(hn::Lanes(df)))
    m = hn::Max(m, hn::Abs(hn::LoadU(df, x + i)));
  return hn::GetLane(hn::MaxOfLanes(df, m));
}

void QuantizeActs(const float* x, int M, int64_t K, QActs* out) {
  const int block = out->block;
  for (int m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    int8_t* q = out->q.data() + m * out->Kp;
    float* gsum = out->gsum.data() + m * (out->Kp / kGroup);
    float* gd = out->gd.data() + m * (out->Kp / kGroup);
    for (int64_t b0 = 0; b0 < K; b0 += block) {
      const float amax = AbsMax(xr + b0, block);
      const float d = amax / 127.0f;
      const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int64_t e = b0; e < b0 + block; e += kGroup) {
        alignas(16) int8_t codes[kGroup];
        const int64_t g = e / kGroup;  // group index in the row
        gsum[g] = static_cast<float>(QuantizeGroup(xr + e, id, codes));
        gd[g] = d;
        // Granule k of group j (j = g % 16) goes to byte 64k + 4j of its chunk.
        int8_t* chunk = q + (e / kChunk) * kChunk + 4 * (g % kGroupsPerChunk);
        for (int k = 0; k < 4; ++k) std::memcpy(chunk + 64 * k, codes + 4 * k, 4);
      }
    }
  }
}

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/error.h"

namespace tandem::kernels::cpu {

HWY_EXPORT(QuantizeActs);

void quantize_acts(const float* x, int M, int64_t K, int block, QActs& out) {
  check(block == 32 || block == 256, "quantize_acts: block size {} is not 32 or 256", block);
  check(K > 0 && K % block == 0, "quantize_acts: row length {} is not a multiple of {}", K,
        block);
  out.M = M;
  out.K = K;
  out.Kp = round_up(K, kChunk);
  out.block = block;
  const size_t groups = static_cast<size_t>(M) * (out.Kp / kGroup);
  out.q.resize(static_cast<size_t>(M) * out.Kp);
  out.gsum.resize(groups);
  out.gd.resize(groups);
  if (out.Kp != K) {  // the padding of each row must read as zeros
    for (int m = 0; m < M; ++m) {
      std::memset(out.q.data() + m * out.Kp + K / kChunk * kChunk, 0, kChunk);
      const size_t g0 = m * (out.Kp / kGroup) + K / kGroup;
      const size_t g1 = (m + 1) * (out.Kp / kGroup);
      std::fill(out.gsum.begin() + g0, out.gsum.begin() + g1, 0.0f);
      std::fill(out.gd.begin() + g0, out.gd.begin() + g1, 0.0f);
    }
  }
  HWY_DYNAMIC_DISPATCH(QuantizeActs)(x, M, K, &out);
  out.sum32.resize(groups / 2);
  for (size_t g = 1; g < groups; g += 2) out.sum32[g / 2] = out.gsum[g - 1] + out.gsum[g];
  if (block == 256) {
    out.q6_offset.resize(groups);
    for (size_t g = 0; g < groups; ++g) out.q6_offset[g] = -32 * static_cast<int32_t>(out.gsum[g]);
  }
}

}  // namespace tandem::kernels::cpu
#endif
