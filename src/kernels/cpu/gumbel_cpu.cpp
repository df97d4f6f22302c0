// The Gumbel-max choice of reproducible sampling (kernels/gumbel_noise.h),
// vectorised over tokens: each lane runs Threefry-2x32-20 on its own counter
// (whose two words serve two neighbouring tokens), turns a word into a uniform
// number and that into a Gumbel variable, and keeps its best score; the lanes'
// bests are merged at the end (highest score, then lowest index). Blocks whose scores before noise
// fall more than kGumbelNoiseBound below the best so far are skipped without drawing noise: they
// cannot win, so the choice is the same as drawing noise everywhere.
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gumbel_cpu.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/gumbel_noise.h"

HWY_BEFORE_NAMESPACE();
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using VU = hn::Vec<DU>;

// One Threefry round: x0 += x1; x1 = rotl(x1, R) ^ x0.
template <int R>
HWY_INLINE void Round(VU& x0, VU& x1) {
  x0 = hn::Add(x0, x1);
  x1 = hn::Xor(hn::RotateRight<32 - R>(x1), x0);
}

// Four rounds, then key injection number `inject`.
template <int R0, int R1, int R2, int R3>
HWY_INLINE void FourRounds(DU du, VU& x0, VU& x1, const uint32_t* ks, uint32_t inject) {
  Round<R0>(x0, x1);
  Round<R1>(x0, x1);
  Round<R2>(x0, x1);
  Round<R3>(x0, x1);
  x0 = hn::Add(x0, hn::Set(du, ks[inject % 3]));
  x1 = hn::Add(x1, hn::Set(du, ks[(inject + 1) % 3] + inject));
}

// Threefry-2x32-20 of counters (x0, x1) under key (k0, k1), in place:
// kernels/gumbel_noise.cpp's threefry2x32, lane by lane.
HWY_INLINE void Threefry(DU du, VU& x0, VU& x1, uint32_t k0, uint32_t k1) {
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  x0 = hn::Add(x0, hn::Set(du, ks[0]));
  x1 = hn::Add(x1, hn::Set(du, ks[1]));
  FourRounds<13, 15, 26, 6>(du, x0, x1, ks, 1);
  FourRounds<17, 29, 16, 24>(du, x0, x1, ks, 2);
  FourRounds<13, 15, 26, 6>(du, x0, x1, ks, 3);
  FourRounds<17, 29, 16, 24>(du, x0, x1, ks, 4);
  FourRounds<13, 15, 26, 6>(du, x0, x1, ks, 5);
}

// ln(x) for positive normal x, without a division: x = 2^e m with m in
// [sqrt(1/2), sqrt(2)), and ln(m) = f R(f) for f = m - 1, R a degree-7
// least-squares fit of ln(1 + f) / f on that range (relative error below 3e-7
// in float, against std::log's 1 ulp; the noise needs no more).
HWY_INLINE VF LogPositive(DF df, VF x) {
  const DI di;
  const VI shifted = hn::Sub(hn::BitCast(di, x), hn::Set(di, 0x3f3504f3));  // sqrt(1/2)'s bits
  const VF e = hn::ConvertTo(df, hn::ShiftRight<23>(shifted));
  const VF m =
      hn::BitCast(df, hn::Add(hn::And(shifted, hn::Set(di, 0x007fffff)), hn::Set(di, 0x3f3504f3)));
  const VF f = hn::Sub(m, hn::Set(df, 1.0f));
  VF r = hn::Set(df, -0.10134056955575943f);
  r = hn::MulAdd(r, f, hn::Set(df, 0.1623418927192688f));
  r = hn::MulAdd(r, f, hn::Set(df, -0.17247013747692108f));
  r = hn::MulAdd(r, f, hn::Set(df, 0.19898565113544464f));
  r = hn::MulAdd(r, f, hn::Set(df, -0.24970071017742157f));
  r = hn::MulAdd(r, f, hn::Set(df, 0.33335113525390625f));
  r = hn::MulAdd(r, f, hn::Set(df, -0.5000036358833313f));
  r = hn::MulAdd(r, f, hn::Set(df, 0.9999999403953552f));
  return hn::MulAdd(e, hn::Set(df, 0.693147180559945f), hn::Mul(f, r));
}

// g = -log(-log(u)), u the word's top 23 bits as an odd multiple of 2^-24.
HWY_INLINE VF Gumbel(DF df, VU word) {
  const DU du;
  const DI di;
  const VU odd = hn::Add(hn::ShiftLeft<1>(hn::ShiftRight<9>(word)), hn::Set(du, 1u));
  const VF u = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, odd)), hn::Set(df, 0x1p-24f));
  return hn::Neg(LogPositive(df, hn::Neg(LogPositive(df, u))));
}

// The running best of each lane: its score and the index that scored it.
struct LaneBest {
  VF score;
  VI index;
};

// Fold one vector of candidates (x: values, g: their noise, index: positions in
// the row) into `best`. Lanes with x = -infinity score -infinity.
HWY_INLINE void Fold(VF x, VF g, VI index, float offset, float scale, LaneBest& best) {
  const DF df;
  const VF s = hn::Mul(hn::Sub(x, hn::Set(df, offset)), hn::Set(df, scale));
  const VF score = hn::Add(s, g);
  const auto better =
      hn::Or(hn::Gt(score, best.score),
             hn::And(hn::Eq(score, best.score), hn::RebindMask(df, hn::Lt(index, best.index))));
  best.score = hn::IfThenElse(better, score, best.score);
  best.index = hn::IfThenElse(hn::RebindMask(DI(), better), index, best.index);
}

// Whether any lane of x could reach `best_so_far` with the largest noise (ties
// included: an earlier index may still take a tie from the hint's block).
HWY_INLINE bool CanReach(VF x, float offset, float scale, float best_so_far) {
  const DF df;
  const VF reach = hn::Add(hn::Mul(hn::Sub(x, hn::Set(df, offset)), hn::Set(df, scale)),
                           hn::Set(df, kGumbelNoiseBound));
  return !hn::AllFalse(df, hn::Ge(reach, hn::Set(df, best_so_far)));
}

int GumbelArgmax(const float* x, const int* ids, int n, float offset, float scale, uint64_t seed,
                 uint32_t position, int hint) {
  const DF df;
  const DI di;
  const DU du;
  const int L = static_cast<int>(hn::Lanes(df));
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  LaneBest best{hn::Set(df, -kInf), hn::Set(di, std::numeric_limits<int32_t>::max())};
  float best_so_far = -kInf;  // a lower bound of the winning score
  const VU pos = hn::Set(du, position);
  // Lanes past the end read -infinity: they never win.
  alignas(64) float xb[128];
  alignas(64) int32_t ib[64];
  if (!ids) {
    // The whole row, 2L tokens a step: lane j's counter (b / 2 + j) gives the
    // noise of token b + 2j (its first word) and b + 2j + 1 (its second).
    const int step = 2 * L;
    const VI evens = hn::ShiftLeft<1>(hn::Iota(di, 0));
    auto block = [&](int b) {
      VF xe, xo;
      if (b + step <= n) {
        hn::LoadInterleaved2(df, x + b, xe, xo);
      } else {
        for (int j = 0; j < step; ++j) xb[j] = b + j < n ? x[b + j] : -kInf;
        hn::LoadInterleaved2(df, xb, xe, xo);
      }
      if (!CanReach(hn::Max(xe, xo), offset, scale, best_so_far)) return;
      VU w0 = hn::Iota(du, static_cast<uint32_t>(b / 2)), w1 = pos;
      Threefry(du, w0, w1, k0, k1);
      const VI even_index = hn::Add(evens, hn::Set(di, b));
      Fold(xe, Gumbel(df, w0), even_index, offset, scale, best);
      Fold(xo, Gumbel(df, w1), hn::Add(even_index, hn::Set(di, 1)), offset, scale, best);
      best_so_far = hn::GetLane(hn::MaxOfLanes(df, best.score));
    };
    if (hint >= 0 && hint < n) block(hint - hint % step);
    for (int b = 0; b < n; b += step) block(b);
  } else {
    // Listed ids, L a step: each id's own counter (id / 2), its word by parity.
    auto block = [&](int i) {
      const int m = std::min(L, n - i);
      VF xv;
      VI idv;
      if (m == L) {
        xv = hn::LoadU(df, x + i);
        idv = hn::LoadU(di, ids + i);
      } else {
        for (int j = 0; j < L; ++j) {
          xb[j] = j < m ? x[i + j] : -kInf;
          ib[j] = j < m ? ids[i + j] : 0;
        }
        xv = hn::Load(df, xb);
        idv = hn::Load(di, ib);
      }
      if (!CanReach(xv, offset, scale, best_so_far)) return;
      const VU id = hn::BitCast(du, idv);
      VU w0 = hn::ShiftRight<1>(id), w1 = pos;
      Threefry(du, w0, w1, k0, k1);
      const auto odd = hn::Eq(hn::And(id, hn::Set(du, 1u)), hn::Set(du, 1u));
      Fold(xv, Gumbel(df, hn::IfThenElse(odd, w1, w0)), hn::Iota(di, i), offset, scale, best);
      best_so_far = hn::GetLane(hn::MaxOfLanes(df, best.score));
    };
    if (hint >= 0 && hint < n) block(hint - hint % L);
    for (int i = 0; i < n; i += L) block(i);
  }
  // Merge the lanes: the highest score, then the lowest index.
  const VF top = hn::MaxOfLanes(df, best.score);
  if (hn::GetLane(top) == -kInf) return -1;
  const VI candidates = hn::IfThenElse(hn::RebindMask(di, hn::Eq(best.score, top)), best.index,
                                       hn::Set(di, std::numeric_limits<int32_t>::max()));
  return hn::GetLane(hn::MinOfLanes(di, candidates));
}

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/target_kernels.h"

namespace tandem::kernels::cpu {
HWY_EXPORT(GumbelArgmax);

void resolve_gumbel(size_t index, TargetKernels& k) {
  k.gumbel_argmax = dispatch_entry(HWY_DISPATCH_TABLE(GumbelArgmax), index);
}
}  // namespace tandem::kernels::cpu
#endif
