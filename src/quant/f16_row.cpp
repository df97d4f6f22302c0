// Floats to IEEE halves a row at a time, vectorised where the CPU converts in
// hardware (Highway's dynamic dispatch picks the target once).

// GCC 12's AVX-512 headers initialise their "undefined" vectors from themselves
// (GCC bug 105593), which -Wmaybe-uninitialized reports wherever such an
// intrinsic is inlined: the headers are included first, with that warning off
// inside them only (as kernels/cpu/hwy_targets.h does for the kernels).
#if defined(__GNUC__) && !defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant/f16_row.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "quant/quants.h"

HWY_BEFORE_NAMESPACE();
namespace tandem::quant_detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rounding to nearest even, NaN kept quiet with its sign and top payload: what
// f32_to_f16 does one value at a time. x86 targets from AVX2 up have the
// conversion instruction (F16C), which gives exactly those bits; the others
// convert one value at a time. (The KV cache stores two rows per position and
// layer: one value at a time is a visible part of a verify pass.)
void F32ToF16Row(const float* x, uint8_t* out, int64_t n) {
  int64_t i = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const int64_t L = static_cast<int64_t>(hn::Lanes(df));
  for (; i + L <= n; i += L)
    hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, x + i)), dh,
               reinterpret_cast<hwy::float16_t*>(out + 2 * i));
#endif
  for (; i < n; ++i) {
    const uint16_t h = f32_to_f16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

}  // namespace tandem::quant_detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tandem {
namespace quant_detail {
HWY_EXPORT(F32ToF16Row);
}  // namespace quant_detail

void f32_to_f16_row(const float* x, void* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(quant_detail::F32ToF16Row)(x, static_cast<uint8_t*>(out), n);
}
}  // namespace tandem
#endif
