// Vectorised activation quantization (see activations.h for the layout).
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/quantize_acts.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/activations.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

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

// max |x| over n (a multiple of 16) values; four chains, so that a 256-value
// block is not one 16-step chain of max latencies (max is exact: any order).
HWY_INLINE float AbsMax(const float* x, int n) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  auto m0 = hn::Zero(df), m1 = hn::Zero(df), m2 = hn::Zero(df), m3 = hn::Zero(df);
  int i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    m0 = hn::Max(m0, hn::Abs(hn::LoadU(df, x + i)));
    m1 = hn::Max(m1, hn::Abs(hn::LoadU(df, x + i + L)));
    m2 = hn::Max(m2, hn::Abs(hn::LoadU(df, x + i + 2 * L)));
    m3 = hn::Max(m3, hn::Abs(hn::LoadU(df, x + i + 3 * L)));
  }
  for (; i < n; i += L) m0 = hn::Max(m0, hn::Abs(hn::LoadU(df, x + i)));
  const auto m = hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
  return hn::GetLane(hn::MaxOfLanes(df, m));
}

// A block's scale d = max|x| / 127 and its inverse (0 for an all-zero block).
struct BlockScale {
  float d, id;
};
HWY_INLINE BlockScale ScaleOf(const float* x, int block) {
  const float amax = AbsMax(x, block);
  return {amax / 127.0f, amax > 0.0f ? 127.0f / amax : 0.0f};
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// A whole 256-element chunk with 16 lanes: group j's codes are computed as one
// vector (the same operations as QuantizeGroup) and the chunk layout is a
// transposition of 128-bit lanes (granule k of groups 4G..4G+3 into bytes
// 64k + 16G..); the group sums come from the transposed codes. (Group by group,
// a horizontal sum and four 4-byte copies each, is slow enough to matter: it
// runs on one thread while the other waits.)
// id[j]: the inverse scale of group j's block.
HWY_INLINE void QuantizeChunk16(const float* x, const float* id, int8_t* q, float* gsum) {
  __m512i sums[4];
  for (int G = 0; G < 4; ++G) {
    __m512i c[4];
    for (int i = 0; i < 4; ++i) {
      const int j = 4 * G + i;
      c[i] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * j), _mm512_set1_ps(id[j])));
    }
    // t[k]: 128-bit lane k of c[0..3], i.e. granule k of the four groups.
    const __m512i a0 = _mm512_shuffle_i32x4(c[0], c[1], 0x44);  // lanes 0, 1 of c0, c1
    const __m512i a1 = _mm512_shuffle_i32x4(c[0], c[1], 0xEE);  // lanes 2, 3
    const __m512i a2 = _mm512_shuffle_i32x4(c[2], c[3], 0x44);
    const __m512i a3 = _mm512_shuffle_i32x4(c[2], c[3], 0xEE);
    const __m512i t[4] = {_mm512_shuffle_i32x4(a0, a2, 0x88), _mm512_shuffle_i32x4(a0, a2, 0xDD),
                          _mm512_shuffle_i32x4(a1, a3, 0x88), _mm512_shuffle_i32x4(a1, a3, 0xDD)};
    for (int k = 0; k < 4; ++k)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 64 * k + 16 * G),
                       _mm512_cvtsepi32_epi8(t[k]));
    // Lane 4i + b of u: the sum over granules of element b; then across b, so
    // that every lane of 128-bit lane i holds group 4G + i's sum.
    __m512i u = _mm512_add_epi32(_mm512_add_epi32(t[0], t[1]), _mm512_add_epi32(t[2], t[3]));
    u = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
    sums[G] = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_CDAB));
  }
  // Lane 4i + G from sums[G], then into group order (lane 4G + i).
  __m512i v = _mm512_mask_blend_epi32(0x2222, sums[0], sums[1]);
  v = _mm512_mask_blend_epi32(0x4444, v, sums[2]);
  v = _mm512_mask_blend_epi32(0x8888, v, sums[3]);
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_ps(gsum, _mm512_cvtepi32_ps(_mm512_permutexvar_epi32(order, v)));
}
#endif

// The derived sums of all groups of all rows (activations.h): per 32 elements
// the sum of the codes, and for block 256 -32 times each group's sum, as
// vectors.
void DerivedSums(QActs* out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const size_t L = hn::Lanes(df), groups = out->gsum.size();
  const float* gsum = out->gsum.data();
  size_t i = 0;
  for (; 2 * (i + L) <= groups; i += L) {
    hn::Vec<decltype(df)> even, odd;
    hn::LoadInterleaved2(df, gsum + 2 * i, even, odd);
    hn::StoreU(hn::Add(even, odd), df, out->sum32.data() + i);
  }
  for (; 2 * i + 1 < groups; ++i) out->sum32[i] = gsum[2 * i] + gsum[2 * i + 1];
  if (out->block != 256) return;
  const auto minus32 = hn::Set(di, -32);
  size_t g = 0;
  for (; g + L <= groups; g += L)
    hn::StoreU(hn::Mul(hn::ConvertTo(di, hn::LoadU(df, gsum + g)), minus32), di,
               out->q6_offset.data() + g);
  for (; g < groups; ++g) out->q6_offset[g] = -32 * static_cast<int32_t>(gsum[g]);
}

void QuantizeActs(const float* x, int M, int64_t K, QActs* out) {
  const int block = out->block;
  for (int m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    int8_t* q = out->q.data() + m * out->Kp;
    float* gsum = out->gsum.data() + m * (out->Kp / kGroup);
    float* gd = out->gd.data() + m * (out->Kp / kGroup);
    int64_t done = 0;  // elements quantized by whole chunks
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
    for (; done + kChunk <= K; done += kChunk) {
      alignas(64) float id[kGroupsPerChunk];
      for (int64_t b0 = done; b0 < done + kChunk; b0 += block) {
        const BlockScale bs = ScaleOf(xr + b0, block);
        for (int64_t e = b0; e < b0 + block; e += kGroup) {
          id[(e - done) / kGroup] = bs.id;
          gd[e / kGroup] = bs.d;
        }
      }
      QuantizeChunk16(xr + done, id, q + done, gsum + done / kGroup);
    }
#endif
    for (int64_t b0 = done; b0 < K; b0 += block) {
      const BlockScale bs = ScaleOf(xr + b0, block);
      for (int64_t e = b0; e < b0 + block; e += kGroup) {
        alignas(16) int8_t codes[kGroup];
        const int64_t g = e / kGroup;  // group index in the row
        gsum[g] = static_cast<float>(QuantizeGroup(xr + e, bs.id, codes));
        gd[g] = bs.d;
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
#include "kernels/cpu/cpu_kernels.h"

namespace tandem::kernels::cpu {

HWY_EXPORT(QuantizeActs);
HWY_EXPORT(DerivedSums);

void resolve_quantize_acts(size_t index, TargetKernels& k) {
  k.quantize_acts = dispatch_entry(HWY_DISPATCH_TABLE(QuantizeActs), index);
  k.derived_sums = dispatch_entry(HWY_DISPATCH_TABLE(DerivedSums), index);
}

void quantize_acts(const TargetKernels& fn, const float* x, int M, int64_t K, int block,
                   QActs& out) {
  check(block == 32 || block == 256, "quantize_acts: block size {} is not 32 or 256", block);
  check(K > 0 && K % block == 0, "quantize_acts: row length {} is not a multiple of {}", K, block);
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
  fn.quantize_acts(x, M, K, &out);
  out.sum32.resize(groups / 2);
  if (block == 256) out.q6_offset.resize(groups);
  fn.derived_sums(&out);
}

}  // namespace tandem::kernels::cpu
#endif
