// Highway target selection shared by every SIMD translation unit of the CPU
// kernels. Include first, before any hwy header.
//
// AVX3_DL (AVX-512 with VNNI/VBMI: Ice Lake, Zen 4) is opt-in in Highway 1.0.3;
// we want it for the int8 dot products (vpdpbusd, vpdpwssd).
#pragma once
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
// SSSE3-only machines are rare; skipping that target saves compile time.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif

// Highway 1.0.3's AVX3_DL target attribute names "avxvnni" (the VEX form, absent
// on Zen 4) but not "avx512vnni", although the target's run-time check requires
// AVX512-VNNI. Files that use the EVEX VNNI intrinsics add
//   #if HWY_TARGET == HWY_AVX3_DL
//   #pragma GCC target("avx512vnni")
//   #endif
// right after HWY_BEFORE_NAMESPACE() (HWY_AFTER_NAMESPACE() pops it again).
// The 256-bit forms still come out VEX-encoded (illegal on Zen 4): use the
// DpbusdEvex256 helper of simd_dot-inl.h for those.

// GCC 12's AVX-512 headers initialise their "undefined" vectors from themselves
// (GCC bug 105593), which -Wmaybe-uninitialized reports at those header lines
// wherever such an intrinsic is inlined. The headers are included here, before
// Highway includes them, with that warning off inside them only; tandem's own
// code keeps it.
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include <cstddef>

namespace tandem::kernels::cpu {

// Entry `index` of an HWY_EXPORT table (see target_kernels.cpp), read once when a
// CpuKernels object is made instead of by HWY_DYNAMIC_DISPATCH on every call.
// A build that compiles a single target has one-entry tables.
template <class Fn, size_t N>
Fn dispatch_entry(Fn const (&table)[N], size_t index) {
  return table[N == 1 ? 0 : index];
}

}  // namespace tandem::kernels::cpu
