// Per-target integer dot-product building blocks of the quantized matmuls,
// included by each Highway translation unit (foreach_target re-includes it once
// per target, hence the toggling guard instead of #pragma once).
//
// DotU8S8 is lane-exact: i32 lane i receives the products of bytes 4i..4i+3, on
// every target, so callers may attach per-lane scales. On AVX3_DL (AVX-512 VNNI)
// it is one instruction; elsewhere portable Highway code computes the same
// integers, and DotU8S8Small does in three AVX2 instructions where the operands
// are small enough.
//
// It also holds, in one block, the raw x86 intrinsics that several kernel files
// share (vpdpbusd, vpmaddubsw and vpmaddwd, prefetcht1 and prefetchnta, vcvtph2ps
// on a scalar).
#if defined(TANDEM_KERNELS_CPU_SIMD_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TANDEM_KERNELS_CPU_SIMD_DOT_INL_H_
#undef TANDEM_KERNELS_CPU_SIMD_DOT_INL_H_
#else
#define TANDEM_KERNELS_CPU_SIMD_DOT_INL_H_
#endif

#include <hwy/highway.h>

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL  // see hwy_targets.h
#pragma GCC target("avx512vnni")
#endif
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------------------
// Raw x86 intrinsics shared by the kernels, each for an instruction that
// Highway 1.0.3 cannot express (a kernel file's own are gathered in one block
// near its top); everything else in the kernels is Highway ops.

#if HWY_ARCH_X86
// prefetcht1 (into L2, not L1): hwy::Prefetch only emits prefetcht0.
HWY_INLINE void PrefetchL2(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
}
// A weight stream's line: prefetchnta where it is read once and the CPU gains
// from it (MatmulChunk::non_temporal), else prefetcht1.
HWY_INLINE void PrefetchStream(const void* p, bool non_temporal) {
  if (non_temporal)
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_NTA);
  else
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
// vpdpbusd zmm: Highway 1.0.3 has no u8 x i8 dot-product-accumulate op.
HWY_INLINE hn::Vec512<int32_t> Dpbusd(hn::Vec512<int32_t> acc, hn::Vec512<uint8_t> u8,
                                      hn::Vec512<int8_t> s8) {
  return hn::Vec512<int32_t>{_mm512_dpbusd_epi32(acc.raw, u8.raw, s8.raw)};
}

// vpdpbusd ymm, forced into its EVEX (AVX512-VNNI) form: Highway 1.0.3 has no
// such op, and under Highway's target string, which names "avxvnni", GCC picks
// the VEX (AVX-VNNI) encoding for the intrinsic, an illegal instruction on CPUs
// without AVX-VNNI such as Zen 4.
HWY_INLINE hn::Vec256<int32_t> DpbusdEvex256(hn::Vec256<int32_t> acc, hn::Vec256<uint8_t> u8,
                                             hn::Vec256<int8_t> s8) {
  __asm__("%{evex%} vpdpbusd %2, %1, %0" : "+v"(acc.raw) : "v"(u8.raw), "v"(s8.raw));
  return acc;
}
#endif

#if HWY_TARGET == HWY_AVX2
// vpmaddubsw: i16 lane j = u8[2j] s8[2j] + u8[2j+1] s8[2j+1], saturated (exact
// under DotU8S8Small's condition). Highway 1.0.3 has no such op.
HWY_INLINE hn::Vec256<int16_t> MaddubsPairs(hn::Vec256<uint8_t> u8, hn::Vec256<int8_t> s8) {
  return hn::Vec256<int16_t>{_mm256_maddubs_epi16(u8.raw, s8.raw)};
}

// vpmaddwd by ones: i32 lane i = the sum of i16 lanes 2i and 2i + 1.
HWY_INLINE hn::Vec256<int32_t> SumPairsI16(hn::Vec256<int16_t> v) {
  return hn::Vec256<int32_t>{_mm256_madd_epi16(v.raw, _mm256_set1_epi16(1))};
}
#endif

// One IEEE half (raw bits) as float: a single instruction with F16C, else bits.
// vcvtph2ps on a scalar: Highway 1.0.3's hwy::F32FromF16 is bit manipulation.
HWY_INLINE float F16ToF32(uint16_t h) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return _cvtsh_ss(h);
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000 | (mant << 13);
  } else if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
#endif
}

// ---------------------------------------------------------------------------
// Highway ops only from here on.

// Sign-extended low and high 16-bit halves of each 32-bit lane.
template <class DI32, class V16>
HWY_INLINE void SplitPairs(DI32 di32, V16 v, hn::Vec<DI32>& lo, hn::Vec<DI32>& hi) {
  const auto v32 = hn::BitCast(di32, v);
  lo = hn::ShiftRight<16>(hn::ShiftLeft<16>(v32));
  hi = hn::ShiftRight<16>(v32);
}

// Products of adjacent byte pairs: i16 lane j = w[2j] * x[2j] + w[2j+1] * x[2j+1],
// with w unsigned and x signed (vpmaddubsw without its saturation; callers keep
// w <= 63 so the sum fits, or use only the separate halves).
template <class DU8>
HWY_INLINE void BytePairProducts(DU8 du8, hn::Vec<DU8> w, hn::Vec<hn::Repartition<int8_t, DU8>> x,
                                 hn::Vec<hn::Repartition<int16_t, DU8>>& even,
                                 hn::Vec<hn::Repartition<int16_t, DU8>>& odd) {
  const hn::Repartition<int16_t, DU8> di16;
  const hn::Repartition<uint16_t, DU8> du16;
  const auto w16 = hn::BitCast(du16, w);
  const auto we = hn::BitCast(di16, hn::And(w16, hn::Set(du16, 0xFF)));
  const auto wo = hn::BitCast(di16, hn::ShiftRight<8>(w16));
  const auto x16 = hn::BitCast(di16, x);
  const auto xe = hn::ShiftRight<8>(hn::ShiftLeft<8>(x16));
  const auto xo = hn::ShiftRight<8>(x16);
  even = hn::Mul(we, xe);  // |255 * 127| fits in i16
  odd = hn::Mul(wo, xo);
}

// acc + (sum over bytes 4i..4i+3 of w * x) in i32 lane i; w unsigned, x signed
// (vpdpbusd).
template <class DU8>
HWY_INLINE hn::Vec<hn::Repartition<int32_t, DU8>> DotU8S8(
    DU8 du8, hn::Vec<hn::Repartition<int32_t, DU8>> acc, hn::Vec<DU8> w,
    hn::Vec<hn::Repartition<int8_t, DU8>> x) {
#if HWY_TARGET == HWY_AVX3_DL
  if constexpr (sizeof(hn::Vec<DU8>) == 64) {
    return Dpbusd(acc, w, x);
  } else if constexpr (sizeof(hn::Vec<DU8>) == 32) {
    return DpbusdEvex256(acc, w, x);
  }
#endif
  const hn::Repartition<int32_t, DU8> di32;
  hn::Vec<hn::Repartition<int16_t, DU8>> even, odd;
  BytePairProducts(du8, w, x, even, odd);
  hn::Vec<decltype(di32)> a, b, c, d;
  SplitPairs(di32, even, a, b);
  SplitPairs(di32, odd, c, d);
  return hn::Add(acc, hn::Add(hn::Add(a, b), hn::Add(c, d)));
}

// DotU8S8 where every pair's sum w[2j] * x[2j] + w[2j+1] * x[2j+1] fits 16 bits,
// which codes w <= 128 against activations in [-127, 127] guarantee (every
// packed type but Q8_0, whose codes reach 255). On AVX2 that makes it vpmaddubsw,
// vpmaddwd by ones and vpaddd, the same integers as the exact form in three
// instructions instead of eleven.
template <class DU8>
HWY_INLINE hn::Vec<hn::Repartition<int32_t, DU8>> DotU8S8Small(
    DU8 du8, hn::Vec<hn::Repartition<int32_t, DU8>> acc, hn::Vec<DU8> w,
    hn::Vec<hn::Repartition<int8_t, DU8>> x) {
#if HWY_TARGET == HWY_AVX2
  if constexpr (sizeof(hn::Vec<DU8>) == 32) return hn::Add(acc, SumPairsI16(MaddubsPairs(w, x)));
#endif
  return DotU8S8(du8, acc, w, x);
}

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
