// Matmul for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) against Q8KActs. Each
// 256-element super-block is unpacked into one form:
//   w = d * sc[g] * u - dmin * m[g]
// with an unsigned code u <= 63 per element and small integer scale sc[g] and
// min m[g] per 16-element group g (32-element sub-blocks repeat theirs):
//   Q4_K, Q5_K: sc, m as stored; u = q        Q2_K: likewise, 16-element groups
//   Q6_K: sc as stored, m = 32 sc, dmin = d    Q3_K: sc - 32, m = 4 (sc - 32), dmin = d
// Against activations x = d_x * q_x, a super-block contributes
//   d_x * (d * sum_g sc[g] * sum(u * q_x) - dmin * sum_g m[g] * bsum_x[g]),
// both sums exact in int32 (vpmaddubsw + vpdpwssd for the first).
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_kquant.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/cpu/matmul_chunk.h"
#include "kernels/cpu/simd_dot-inl.h"
#include "kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL  // see hwy_targets.h
#pragma GCC target("avx512vnni")
#endif
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
using namespace tandem::quant_detail;

struct KQuantRow {
  std::vector<uint8_t> u;   // K codes
  std::vector<int16_t> sc;  // K / 2: the group scale once per byte pair
  std::vector<int16_t> m;   // K / 16
  std::vector<float> d, dmin;  // K / 256
  void resize(int64_t K) {
    if (static_cast<int64_t>(u.size()) == K) return;
    u.resize(K);
    sc.resize(K / 2);
    m.resize(K / 16);
    d.resize(K / 256);
    dmin.resize(K / 256);
  }
};

// Raw pointers into a KQuantRow for the unpackers: stores through uint8_t* may
// alias anything, so going through the vectors would reload their data pointers
// after every store.
struct RowOut {
  uint8_t* u;
  int16_t* sc;
  int16_t* m;
  float* d;
  float* dmin;
};

using D32 = hn::CappedTag<uint8_t, 32>;

// Group g's scale into its 8 pair lanes, its min into m[g].
HWY_INLINE void SetGroup(RowOut r, int64_t sb, int g, int sc, int mn) {
  const hn::CappedTag<int16_t, 8> d16;
  int16_t* dst = &r.sc[sb * 128 + g * 8];
  for (size_t i = 0; i < 8; i += hn::Lanes(d16))
    hn::StoreU(hn::Set(d16, static_cast<int16_t>(sc)), d16, dst + i);
  r.m[sb * 16 + g] = static_cast<int16_t>(mn);
}

HWY_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// Q4_K and Q5_K share their layout apart from Q5_K's high bits.
template <class Block, bool kHasHigh>
HWY_INLINE void UnpackQ45K(const uint8_t* blk, int64_t sb, RowOut r) {
  const uint8_t* qs = blk + offsetof(Block, qs);
  const uint8_t* scales = blk + offsetof(Block, scales);
  const uint8_t* qh = nullptr;
  if constexpr (kHasHigh) qh = blk + offsetof(BlockQ5_K, qh);
  const D32 dv;
  uint8_t* u = &r.u[sb * 256];
  for (int c = 0; c < 4; ++c) {
    for (size_t i = 0; i < 32; i += hn::Lanes(dv)) {
      const auto v = hn::LoadU(dv, qs + 32 * c + i);
      auto lo = hn::And(v, hn::Set(dv, 0x0F));
      auto hi = hn::ShiftRight<4>(v);
      if constexpr (kHasHigh) {  // bit 2c of qh[l] for the low half, 2c + 1 for the high
        const auto h = hn::LoadU(dv, qh + i);
        const auto one = hn::Set(dv, 1);
        const auto bit_lo = hn::Set(dv, uint8_t(1u << (2 * c)));
        const auto bit_hi = hn::Set(dv, uint8_t(2u << (2 * c)));
        lo = hn::Add(lo, hn::ShiftLeft<4>(hn::Min(hn::And(h, bit_lo), one)));
        hi = hn::Add(hi, hn::ShiftLeft<4>(hn::Min(hn::And(h, bit_hi), one)));
      }
      hn::StoreU(lo, dv, u + 64 * c + i);
      hn::StoreU(hi, dv, u + 64 * c + 32 + i);
    }
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    unpack_k4_scale_min(scales, j, sc, mn);
    SetGroup(r, sb, 2 * j, sc, mn);
    SetGroup(r, sb, 2 * j + 1, sc, mn);
  }
  r.d[sb] = HalfAt(blk + offsetof(Block, d));
  r.dmin[sb] = HalfAt(blk + offsetof(Block, dmin));
}

// Reads the block in place: a local copy would make the vector loads wait on
// store forwarding.
HWY_INLINE void UnpackQ6K(const uint8_t* blk, int64_t sb, RowOut r) {
  const uint8_t* ql = blk + offsetof(BlockQ6_K, ql);
  const uint8_t* qh = blk + offsetof(BlockQ6_K, qh);
  const auto* scales = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
  const D32 dv;
  const auto low4 = hn::Set(dv, 0x0F), low2 = hn::Set(dv, 0x03);
  uint8_t* u = &r.u[sb * 256];
  for (int n = 0; n < 2; ++n) {
    for (size_t i = 0; i < 32; i += hn::Lanes(dv)) {
      const auto qa = hn::LoadU(dv, ql + 64 * n + i);
      const auto qb = hn::LoadU(dv, ql + 64 * n + 32 + i);
      const auto h = hn::LoadU(dv, qh + 32 * n + i);
      uint8_t* o = u + 128 * n + i;
      hn::StoreU(hn::Or(hn::And(qa, low4), hn::ShiftLeft<4>(hn::And(h, low2))), dv, o);
      hn::StoreU(hn::Or(hn::And(qb, low4), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), low2))),
                 dv, o + 32);
      const auto h2 = hn::And(hn::ShiftRight<4>(h), low2);
      hn::StoreU(hn::Or(hn::ShiftRight<4>(qa), hn::ShiftLeft<4>(h2)), dv, o + 64);
      hn::StoreU(hn::Or(hn::ShiftRight<4>(qb), hn::ShiftLeft<4>(hn::ShiftRight<6>(h))), dv, o + 96);
    }
  }
  for (int g = 0; g < 16; ++g) SetGroup(r, sb, g, scales[g], 32 * scales[g]);
  r.d[sb] = r.dmin[sb] = HalfAt(blk + offsetof(BlockQ6_K, d));
}

// The rarely used low-bit K-quants take a plain scalar unpack.
HWY_INLINE void UnpackQ2K(const BlockQ2_K& b, int64_t sb, RowOut r) {
  uint8_t* u = &r.u[sb * 256];
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = (e % 128) / 32, l = e % 32;
    u[e] = (b.qs[32 * n + l] >> (2 * k)) & 3;
  }
  for (int g = 0; g < 16; ++g) SetGroup(r, sb, g, b.scales[g] & 0xF, b.scales[g] >> 4);
  r.d[sb] = F16ToF32(b.d);
  r.dmin[sb] = F16ToF32(b.dmin);
}

HWY_INLINE void UnpackQ3K(const BlockQ3_K& b, int64_t sb, RowOut r) {
  uint8_t* u = &r.u[sb * 256];
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = (e % 128) / 32, l = e % 32;
    const int low = (b.qs[32 * n + l] >> (2 * k)) & 3;
    const int high = (b.hmask[l] >> (e / 32)) & 1;  // set: q = low, clear: q = low - 4
    u[e] = static_cast<uint8_t>(low + 4 * high);
  }
  for (int g = 0; g < 16; ++g) {
    const int s = unpack_q3k_scale(b.scales, g) - 32;
    SetGroup(r, sb, g, s, 4 * s);
  }
  r.d[sb] = r.dmin[sb] = F16ToF32(b.d);
}

template <class Block>
HWY_INLINE Block LoadBlock(const uint8_t* src) {
  Block b;
  std::memcpy(&b, src, sizeof b);
  return b;
}

void UnpackRow(DType type, const uint8_t* src, int64_t nsb, KQuantRow& row) {
  const RowOut r{row.u.data(), row.sc.data(), row.m.data(), row.d.data(), row.dmin.data()};
  for (int64_t sb = 0; sb < nsb; ++sb) {
    switch (type) {
      case DType::Q4_K:
        UnpackQ45K<BlockQ4_K, false>(src + sb * sizeof(BlockQ4_K), sb, r);
        break;
      case DType::Q5_K:
        UnpackQ45K<BlockQ5_K, true>(src + sb * sizeof(BlockQ5_K), sb, r);
        break;
      case DType::Q6_K:
        UnpackQ6K(src + sb * sizeof(BlockQ6_K), sb, r);
        break;
      case DType::Q2_K:
        UnpackQ2K(LoadBlock<BlockQ2_K>(src + sb * sizeof(BlockQ2_K)), sb, r);
        break;
      case DType::Q3_K:
        UnpackQ3K(LoadBlock<BlockQ3_K>(src + sb * sizeof(BlockQ3_K)), sb, r);
        break;
      default:
        return;  // the driver sends only the types above
    }
  }
}

// One unpacked weight row against activation row m. The order of every
// addition is fixed by K alone (batch invariance).
HWY_INLINE float DotRow(const KQuantRow& r, const Q8KActs& a, int m) {
  const hn::ScalableTag<uint8_t> du8;
  const hn::Repartition<int8_t, decltype(du8)> di8;
  const hn::Repartition<int16_t, decltype(du8)> di16;
  const hn::Repartition<int32_t, decltype(du8)> di32;
  const hn::Repartition<float, decltype(du8)> df;
  const hn::CappedTag<int32_t, 16> dm32;  // the 16 group mins of a super-block
  const hn::Rebind<int16_t, decltype(dm32)> dm16;
  const hn::Rebind<float, decltype(dm32)> dmf;
  const int64_t L = static_cast<int64_t>(hn::Lanes(du8));  // 16, 32 or 64: divides 256 evenly
  const int8_t* xq = a.row_q(m);
  const float* xd = a.row_d(m);
  const int16_t* xb = a.row_bsum(m);
  auto acc = hn::Zero(df);
  auto accm = hn::Zero(dmf);
  for (int64_t sb = 0; sb < a.K / 256; ++sb) {
    const int64_t e0 = sb * 256;
    auto s0 = hn::Zero(di32), s1 = hn::Zero(di32);
    for (int64_t k = e0; k < e0 + 256; k += 2 * L) {
      s0 = DotU8S8Scaled(du8, s0, hn::LoadU(du8, &r.u[k]), hn::LoadU(di8, xq + k),
                         hn::LoadU(di16, &r.sc[k / 2]));
      s1 = DotU8S8Scaled(du8, s1, hn::LoadU(du8, &r.u[k + L]), hn::LoadU(di8, xq + k + L),
                         hn::LoadU(di16, &r.sc[(k + L) / 2]));
    }
    auto mins = hn::Zero(dm32);
    for (size_t g = 0; g < 16; g += hn::Lanes(dm32))
      mins = hn::Add(mins, hn::Mul(hn::PromoteTo(dm32, hn::LoadU(dm16, &r.m[sb * 16 + g])),
                                   hn::PromoteTo(dm32, hn::LoadU(dm16, xb + sb * 16 + g))));
    acc = hn::MulAdd(hn::ConvertTo(df, hn::Add(s0, s1)), hn::Set(df, r.d[sb] * xd[sb]), acc);
    accm = hn::MulAdd(hn::ConvertTo(dmf, mins), hn::Set(dmf, -r.dmin[sb] * xd[sb]), accm);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc)) + hn::GetLane(hn::SumOfLanes(dmf, accm));
}

void KQuantChunk(const MatmulChunk& c) {
  static thread_local KQuantRow row;
  const Q8KActs& a = *c.q8k;
  row.resize(c.K);
  for (int64_t n = c.n0; n < c.n1; ++n) {
    UnpackRow(c.type, c.w + n * c.row_bytes, c.K / 256, row);
    for (int m = c.m0; m < c.m1; ++m) c.y[m * c.ldy + n] = DotRow(row, a, m);
  }
}

#else   // HWY_SCALAR: use the dequantizing fallback.
void KQuantChunk(const MatmulChunk& c) { matmul_chunk_dequant(c); }
#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tandem::kernels::cpu {
HWY_EXPORT(KQuantChunk);
void matmul_chunk_kquant(const MatmulChunk& c) { HWY_DYNAMIC_DISPATCH(KQuantChunk)(c); }
}  // namespace tandem::kernels::cpu
#endif
