// Vectorised RMSNorm, SwiGLU, bias add and rotary embedding. Each works on one
// row and its summation order depends only on the row length.
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/elementwise_cpu.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernels.h"
#include "quant/quants.h"

HWY_BEFORE_NAMESPACE();
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void RmsNorm(const float* x, const float* w, int n, float eps, float* out) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  int i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    const auto v0 = hn::LoadU(df, x + i), v1 = hn::LoadU(df, x + i + L);
    a0 = hn::MulAdd(v0, v0, a0);
    a1 = hn::MulAdd(v1, v1, a1);
  }
  float ss = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1)));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const auto vs = hn::Set(df, scale);
  i = 0;
  for (; i + L <= n; i += L)
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, x + i), vs), hn::LoadU(df, w + i)), df, out + i);
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

void SwiGLU(const float* gate, const float* up, int n, float* out) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  const auto one = hn::Set(df, 1.0f);
  int i = 0;
  for (; i + L <= n; i += L) {
    const auto g = hn::LoadU(df, gate + i);
    const auto silu = hn::Div(g, hn::Add(one, hn::Exp(df, hn::Neg(g))));
    hn::StoreU(hn::Mul(silu, hn::LoadU(df, up + i)), df, out + i);
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void AddInplace(float* x, const float* b, int n) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  int i = 0;
  for (; i + L <= n; i += L)
    hn::StoreU(hn::Add(hn::LoadU(df, x + i), hn::LoadU(df, b + i)), df, x + i);
  for (; i < n; ++i) x[i] += b[i];
}

// The rotation is vectorised for the NeoX layout, whose pairs are half a head apart.
void Rope(float* x, int n_heads, int head_dim, const float* c, const float* s, RopeStyle style) {
  const int half = head_dim / 2;
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<size_t>(h) * head_dim;
    if (style == RopeStyle::NeoX) {
      int i = 0;
      for (; i + L <= half; i += L) {
        const auto x0 = hn::LoadU(df, v + i), x1 = hn::LoadU(df, v + half + i);
        const auto vc = hn::LoadU(df, c + i), vsn = hn::LoadU(df, s + i);
        hn::StoreU(hn::Sub(hn::Mul(x0, vc), hn::Mul(x1, vsn)), df, v + i);
        hn::StoreU(hn::Add(hn::Mul(x0, vsn), hn::Mul(x1, vc)), df, v + half + i);
      }
      for (; i < half; ++i) {
        const float x0 = v[i], x1 = v[half + i];
        v[i] = x0 * c[i] - x1 * s[i];
        v[half + i] = x0 * s[i] + x1 * c[i];
      }
    } else {
      for (int i = 0; i < half; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * c[i] - x1 * s[i];
        v[2 * i + 1] = x0 * s[i] + x1 * c[i];
      }
    }
  }
}

// The first index of the largest value, or -1 if any value is NaN: a vector
// maximum, then a vector search for its first occurrence. (Greedy verification
// scans a whole vocabulary per verified position: a scalar scan is a visible
// part of a speculative round.)
int ArgMax(const float* x, int n) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  auto vmax = hn::Set(df, -INFINITY);
  auto nan = hn::Zero(df);  // all-ones lanes where a NaN was seen
  int i = 0;
  for (; i + L <= n; i += L) {
    const auto v = hn::LoadU(df, x + i);
    vmax = hn::Max(vmax, v);
    nan = hn::Or(nan, hn::VecFromMask(df, hn::IsNaN(v)));
  }
  if (!hn::AllFalse(df, hn::MaskFromVec(nan))) return -1;
  float m = hn::GetLane(hn::MaxOfLanes(df, vmax));
  for (int j = i; j < n; ++j) {
    if (std::isnan(x[j])) return -1;
    m = std::max(m, x[j]);
  }
  const auto vm = hn::Set(df, m);
  for (i = 0; i + L <= n; i += L) {
    const intptr_t first = hn::FindFirstTrue(df, hn::Eq(hn::LoadU(df, x + i), vm));
    if (first >= 0) return i + static_cast<int>(first);
  }
  for (; i < n; ++i)
    if (x[i] == m) return i;
  return 0;  // n == 0
}

// sum over i of exp((x[i] - shift) * scale), each exponent clamped at -87 (where
// exp is below the smallest normal float, so a term that small, -infinity
// included, adds nothing); NaN if any x[i] is. Four float accumulators; terms
// are at most 1 where no x[i] exceeds shift. (A draft model's confidence in
// each drafted token reads a softmax over the ids it may propose: scalar, 89 us
// a step of 32768 logits on the Zen 5, 2.5% of a draft step; this, 8 us:
// `tandem_bench_kernels --benchmark_filter=SumExp`.)
float SumExp(const float* x, int n, float shift, float scale) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  const auto vshift = hn::Set(df, shift), vscale = hn::Set(df, scale), floor = hn::Set(df, -87.0f);
  auto nan = hn::Zero(df);  // all-ones lanes where a NaN was seen (Exp need not keep one)
  auto term = [&](const float* p) HWY_ATTR {
    const auto v = hn::LoadU(df, p);
    nan = hn::Or(nan, hn::VecFromMask(df, hn::IsNaN(v)));
    return hn::Exp(df, hn::Max(hn::Mul(hn::Sub(v, vshift), vscale), floor));
  };
  auto s0 = hn::Zero(df), s1 = hn::Zero(df), s2 = hn::Zero(df), s3 = hn::Zero(df);
  int i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    s0 = hn::Add(s0, term(x + i));
    s1 = hn::Add(s1, term(x + i + L));
    s2 = hn::Add(s2, term(x + i + 2 * L));
    s3 = hn::Add(s3, term(x + i + 3 * L));
  }
  for (; i + L <= n; i += L) s0 = hn::Add(s0, term(x + i));
  if (!hn::AllFalse(df, hn::MaskFromVec(nan))) return std::numeric_limits<float>::quiet_NaN();
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (; i < n; ++i) {
    if (std::isnan(x[i])) return std::numeric_limits<float>::quiet_NaN();
    sum += std::exp(std::max((x[i] - shift) * scale, -87.0f));
  }
  return sum;
}

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/target_kernels.h"

namespace tandem::kernels::cpu {
HWY_EXPORT(RmsNorm);
HWY_EXPORT(SwiGLU);
HWY_EXPORT(AddInplace);
HWY_EXPORT(Rope);
HWY_EXPORT(ArgMax);
HWY_EXPORT(SumExp);

void resolve_elementwise(size_t index, TargetKernels& k) {
  k.rmsnorm = dispatch_entry(HWY_DISPATCH_TABLE(RmsNorm), index);
  k.swiglu = dispatch_entry(HWY_DISPATCH_TABLE(SwiGLU), index);
  k.add_inplace = dispatch_entry(HWY_DISPATCH_TABLE(AddInplace), index);
  k.rope = dispatch_entry(HWY_DISPATCH_TABLE(Rope), index);
  k.argmax = dispatch_entry(HWY_DISPATCH_TABLE(ArgMax), index);
  k.sum_exp = dispatch_entry(HWY_DISPATCH_TABLE(SumExp), index);
}
}  // namespace tandem::kernels::cpu
#endif
