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
// ---------------------------------------------------------------------------
// Raw x86 intrinsics of QuantizeChunk16, each for an instruction that Highway
// 1.0.3 cannot express.
using DI32x16 = hn::ScalableTag<int32_t>;  // 16 lanes on AVX3 and AVX3_DL
using VI32x16 = hn::Vec<DI32x16>;

// vcvtps2dq alone: Highway 1.0.3's NearestInt adds three instructions that turn
// positive out-of-range (and NaN) lanes into INT_MAX where vcvtps2dq gives
// INT_MIN; |x / d| <= 127 never needs them.
HWY_INLINE VI32x16 RoundToInt32(hn::Vec<hn::ScalableTag<float>> v) {
  return VI32x16{_mm512_cvtps_epi32(v.raw)};
}

// vpmovsdb, the 16 lanes saturated to int8: Highway 1.0.3's DemoteTo is two packs
// and a permute.
HWY_INLINE hn::Vec128<int8_t> SaturateToInt8(VI32x16 v) {
  return hn::Vec128<int8_t>{_mm512_cvtsepi32_epi8(v.raw)};
}

// vshufi32x4 taking 128-bit blocks 0, 2 of a then 0, 2 of b (even blocks), or
// 1, 3 of each (odd blocks): Highway 1.0.3 has no such block shuffle (its
// ConcatEven/ConcatOdd work on lanes).
HWY_INLINE VI32x16 EvenBlocks(VI32x16 a, VI32x16 b) {
  return VI32x16{_mm512_shuffle_i32x4(a.raw, b.raw, 0x88)};
}
HWY_INLINE VI32x16 OddBlocks(VI32x16 a, VI32x16 b) {
  return VI32x16{_mm512_shuffle_i32x4(a.raw, b.raw, 0xDD)};
}

// ---------------------------------------------------------------------------
// A whole 256-element chunk with 16 lanes: group j's codes are computed as one
// vector (the same operations as QuantizeGroup) and the chunk layout is a
// transposition of 128-bit lanes (granule k of groups 4G..4G+3 into bytes
// 64k + 16G..); the group sums come from the transposed codes. (Group by group,
// a horizontal sum and four 4-byte copies each, is slow enough to matter: it
// runs on one thread while the other waits.)
// id[j]: the inverse scale of group j's block.
HWY_INLINE void QuantizeChunk16(const float* x, const float* id, int8_t* q, float* gsum) {
  const hn::ScalableTag<float> df;
  const DI32x16 di32;
  const hn::Full128<int8_t> di8;
  VI32x16 sums[4];
  for (int G = 0; G < 4; ++G) {
    VI32x16 c[4];
    for (int i = 0; i < 4; ++i) {
      const int j = 4 * G + i;
      c[i] = RoundToInt32(hn::Mul(hn::LoadU(df, x + 16 * j), hn::Set(df, id[j])));
    }
    // t[k]: 128-bit lane k of c[0..3], i.e. granule k of the four groups.
    const VI32x16 a0 = hn::ConcatLowerLower(di32, c[1], c[0]);  // lanes 0, 1 of c0, c1
    const VI32x16 a1 = hn::ConcatUpperUpper(di32, c[1], c[0]);  // lanes 2, 3
    const VI32x16 a2 = hn::ConcatLowerLower(di32, c[3], c[2]);
    const VI32x16 a3 = hn::ConcatUpperUpper(di32, c[3], c[2]);
    const VI32x16 t[4] = {EvenBlocks(a0, a2), OddBlocks(a0, a2), EvenBlocks(a1, a3),
                          OddBlocks(a1, a3)};
    for (int k = 0; k < 4; ++k) hn::StoreU(SaturateToInt8(t[k]), di8, q + 64 * k + 16 * G);
    // Lane 4i + b of u: the sum over granules of element b; then across b, so
    // that every lane of 128-bit lane i holds group 4G + i's sum.
    VI32x16 u = hn::Add(hn::Add(t[0], t[1]), hn::Add(t[2], t[3]));
    u = hn::Add(u, hn::Shuffle1032(u));
    sums[G] = hn::Add(u, hn::Shuffle2301(u));
  }
  // Lane 4i + G from sums[G], then into group order (lane 4G + i).
  auto lanes = [&](uint64_t bits) {
    uint8_t bytes[8];
    std::memcpy(bytes, &bits, 8);
    return hn::LoadMaskBits(di32, bytes);
  };
  VI32x16 v = hn::IfThenElse(lanes(0x2222), sums[1], sums[0]);
  v = hn::IfThenElse(lanes(0x4444), sums[2], v);
  v = hn::IfThenElse(lanes(0x8888), sums[3], v);
  alignas(64) static constexpr int32_t kOrder[16] = {0, 4, 8,  12, 1, 5, 9,  13,
                                                     2, 6, 10, 14, 3, 7, 11, 15};
  const auto order = hn::SetTableIndices(di32, kOrder);
  hn::StoreU(hn::ConvertTo(df, hn::TableLookupLanes(v, order)), df, gsum);
}
#endif

// The derived sums of all groups of all rows (activations.h): per 32 elements
// the sum of the codes, and for block 256 -32 times each group's sum or for
// block 32 -8 times each 32 elements' sum, as vectors.
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
  if (out->block == 32) {
    const auto minus8 = hn::Set(di, -8);
    const size_t n = groups / 2;
    size_t b = 0;
    for (; b + L <= n; b += L)
      hn::StoreU(hn::Mul(hn::ConvertTo(di, hn::LoadU(df, out->sum32.data() + b)), minus8), di,
                 out->q4_offset.data() + b);
    for (; b < n; ++b) out->q4_offset[b] = -8 * static_cast<int32_t>(out->sum32[b]);
    return;
  }
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
  if (block == 32) out.q4_offset.resize(groups / 2);
  fn.derived_sums(&out);
}

}  // namespace tandem::kernels::cpu
#endif
