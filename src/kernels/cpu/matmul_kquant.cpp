// Matmul for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) against activations with
// one scale per 256 elements. A super-block is one activation chunk; it decodes
// into the form of quant_tile-inl.h, per 16-element group g:
//   Q4_K, Q5_K, Q2_K: w = d * sc[g] * u - dmin * m[g]  ->  a = d sc, b = dmin m
//   Q6_K: w = d * sc[g] * (u - 32)                      ->  a = d sc, b = 32 a
//   Q3_K: w = d * (sc[g] - 32) * (u - 4)                ->  a = d (sc - 32), b = 4 a
// with u the unsigned code (Q3_K: the 2 low bits plus 4 for a set hmask bit) and
// 32-element sub-blocks (Q4_K, Q5_K) giving both their groups the same scales.
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_kquant.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstddef>
#include <cstring>

#include "kernels/cpu/matmul_chunk.h"
#include "kernels/cpu/quant_tile-inl.h"
#include "kernels/cpu/simd_dot-inl.h"
#include "quant/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL  // see hwy_targets.h
#pragma GCC target("avx512vnni")
#endif
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
using namespace tandem::quant_detail;

HWY_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// ---------------------------------------------------------------------------
// Portable unpackers: one super-block into natural-order codes u[256] and the
// groups' a[16], b[16]. They read the block in place: a local copy would make
// the vector loads wait on store forwarding.

using D32 = hn::CappedTag<uint8_t, 32>;

// Q4_K and Q5_K share their layout apart from Q5_K's high bits.
template <class Block, bool kHasHigh>
HWY_INLINE void UnpackQ45K(const uint8_t* blk, uint8_t* u, float* a, float* b) {
  const uint8_t* qs = blk + offsetof(Block, qs);
  const uint8_t* scales = blk + offsetof(Block, scales);
  const uint8_t* qh = nullptr;
  if constexpr (kHasHigh) qh = blk + offsetof(BlockQ5_K, qh);
  const D32 dv;
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
  const float d = HalfAt(blk + offsetof(Block, d));
  const float dmin = HalfAt(blk + offsetof(Block, dmin));
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    unpack_k4_scale_min(scales, j, sc, mn);
    a[2 * j] = a[2 * j + 1] = static_cast<float>(sc) * d;
    b[2 * j] = b[2 * j + 1] = static_cast<float>(mn) * dmin;
  }
}

HWY_INLINE void UnpackQ6K(const uint8_t* blk, uint8_t* u, float* a, float* b) {
  const uint8_t* ql = blk + offsetof(BlockQ6_K, ql);
  const uint8_t* qh = blk + offsetof(BlockQ6_K, qh);
  const auto* scales = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
  const D32 dv;
  const auto low4 = hn::Set(dv, 0x0F), low2 = hn::Set(dv, 0x03);
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
  const float d = HalfAt(blk + offsetof(BlockQ6_K, d));
  for (int g = 0; g < 16; ++g) {
    a[g] = static_cast<float>(scales[g]) * d;
    b[g] = a[g] * 32.0f;
  }
}

// The rarely used low-bit K-quants take a plain scalar unpack.
HWY_INLINE void UnpackQ2K(const uint8_t* blk, uint8_t* u, float* a, float* b) {
  const uint8_t* qs = blk + offsetof(BlockQ2_K, qs);
  const uint8_t* scales = blk + offsetof(BlockQ2_K, scales);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = (e % 128) / 32, l = e % 32;
    u[e] = (qs[32 * n + l] >> (2 * k)) & 3;
  }
  const float d = HalfAt(blk + offsetof(BlockQ2_K, d));
  const float dmin = HalfAt(blk + offsetof(BlockQ2_K, dmin));
  for (int g = 0; g < 16; ++g) {
    a[g] = static_cast<float>(scales[g] & 0xF) * d;
    b[g] = static_cast<float>(scales[g] >> 4) * dmin;
  }
}

HWY_INLINE void UnpackQ3K(const uint8_t* blk, uint8_t* u, float* a, float* b) {
  const uint8_t* qs = blk + offsetof(BlockQ3_K, qs);
  const uint8_t* hmask = blk + offsetof(BlockQ3_K, hmask);
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, k = (e % 128) / 32, l = e % 32;
    const int low = (qs[32 * n + l] >> (2 * k)) & 3;
    const int high = (hmask[l] >> (e / 32)) & 1;  // set: q = low, clear: q = low - 4
    u[e] = static_cast<uint8_t>(low + 4 * high);
  }
  const float d = HalfAt(blk + offsetof(BlockQ3_K, d));
  for (int g = 0; g < 16; ++g) {
    a[g] = static_cast<float>(unpack_q3k_scale(blk + offsetof(BlockQ3_K, scales), g) - 32) * d;
    b[g] = a[g] * 4.0f;
  }
}

template <size_t kBlockBytes, class UnpackBlock>
HWY_INLINE void UnpackKRow(const uint8_t* src, UnpackedRow& row, const UnpackBlock& unpack) {
  alignas(64) uint8_t natural[kChunk];
  const int64_t nsb = static_cast<int64_t>(row.codes.size()) / kChunk;
  uint8_t* codes = row.codes.data();
  float* a = row.a.data();
  float* b = row.b.data();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    unpack(src + sb * kBlockBytes, natural, a + sb * kGroupsPerChunk, b + sb * kGroupsPerChunk);
    ToChunkLayout(natural, codes + sb * kChunk);
  }
}

void PortableKQuant(const MatmulChunk& c) {
  switch (c.type) {
    case DType::Q4_K:
      return PortableColumns(c, [](const uint8_t* s, UnpackedRow& r) {
        UnpackKRow<sizeof(BlockQ4_K)>(s, r, UnpackQ45K<BlockQ4_K, false>);
      });
    case DType::Q5_K:
      return PortableColumns(c, [](const uint8_t* s, UnpackedRow& r) {
        UnpackKRow<sizeof(BlockQ5_K)>(s, r, UnpackQ45K<BlockQ5_K, true>);
      });
    case DType::Q6_K:
      return PortableColumns(c, [](const uint8_t* s, UnpackedRow& r) {
        UnpackKRow<sizeof(BlockQ6_K)>(s, r, UnpackQ6K);
      });
    case DType::Q2_K:
      return PortableColumns(c, [](const uint8_t* s, UnpackedRow& r) {
        UnpackKRow<sizeof(BlockQ2_K)>(s, r, UnpackQ2K);
      });
    case DType::Q3_K:
      return PortableColumns(c, [](const uint8_t* s, UnpackedRow& r) {
        UnpackKRow<sizeof(BlockQ3_K)>(s, r, UnpackQ3K);
      });
    default:
      return;  // the driver sends only the types above
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// ---------------------------------------------------------------------------
// Raw x86 intrinsics of the register decoders below, each for an instruction
// that Highway 1.0.3 cannot express (vpermt2d: TwoTablesLookupLanes32 in
// quant_tile-inl.h; vpdpbusd: simd_dot-inl.h).

// vmovq + vpinsrq: Highway 1.0.3 cannot make a vector of two different scalars.
HWY_INLINE hn::Vec128<uint8_t> BytesFromU64s(uint64_t lo, uint64_t hi) {
  return hn::Vec128<uint8_t>{_mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo))};
}

// vmovd + vpinsrd: Highway 1.0.3 cannot make a vector of four different scalars.
HWY_INLINE hn::Vec128<uint8_t> BytesFromU32s(uint32_t f0, uint32_t f1, uint32_t f2, uint32_t f3) {
  return hn::Vec128<uint8_t>{_mm_set_epi32(static_cast<int>(f3), static_cast<int>(f2),
                                           static_cast<int>(f1), static_cast<int>(f0))};
}

// vprolvd: Highway 1.0.3 rotates only by an immediate (RotateRight<k>).
HWY_INLINE hn::Vec<DU32> RotateLeftVar(hn::Vec<DU32> v, hn::Vec<DU32> bits) {
  return hn::Vec<DU32>{_mm512_rolv_epi32(v.raw, bits.raw)};
}

// vpermb with a zeroing mask (VBMI), byte 4g of the result from table byte
// idx[4g], the other bytes zero: Highway 1.0.3 has no cross-block byte permute
// (TableLookupBytes stays within 128-bit blocks) and no zero-masked permute.
HWY_INLINE hn::Vec<DI32> BytesToDwords(hn::Vec<DU8> idx, hn::Vec128<uint8_t> table) {
  constexpr __mmask64 kDwordLow = 0x1111111111111111ull;
  return hn::Vec<DI32>{
      _mm512_maskz_permutexvar_epi8(kDwordLow, idx.raw, _mm512_castsi128_si512(table.raw))};
}

// ---------------------------------------------------------------------------
// Register decoders (AVX-512 VBMI/VNNI). Group g of a chunk is 32-bit lane g;
// c[k] lane g holds elements 16g + 4k .. 16g + 4k + 3. Each type gathers the
// dwords holding those codes with a permute (the same permute for every block,
// so the indices are constants) and shifts/masks per lane.

// Q4_K/Q5_K sub-block scales and mins as bytes [sc0..sc7, m0..m7].
HWY_INLINE hn::Vec128<uint8_t> ScalesMinsK4(const uint8_t* s) {
  uint32_t a, b, c;
  std::memcpy(&a, s, 4);
  std::memcpy(&b, s + 4, 4);
  std::memcpy(&c, s + 8, 4);
  const uint32_t sc_lo = a & 0x3F3F3F3F, m_lo = b & 0x3F3F3F3F;
  const uint32_t sc_hi = (c & 0x0F0F0F0F) | ((a >> 2) & 0x30303030);
  const uint32_t m_hi = ((c >> 4) & 0x0F0F0F0F) | ((b >> 2) & 0x30303030);
  return BytesFromU64s(sc_lo | (uint64_t{sc_hi} << 32), m_lo | (uint64_t{m_hi} << 32));
}

// Q3_K's 16 6-bit scale fields as bytes (see unpack_q3k_scale): the low 4 bits of
// fields 0-7 / 8-15 are the low / high nibbles of bytes 0-7, the top 2 bits of
// field j are bits 2 (j / 4) of byte 8 + j % 4.
HWY_INLINE hn::Vec128<uint8_t> ScalesQ3K(const uint8_t* s) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, s, 4);
  std::memcpy(&a1, s + 4, 4);
  std::memcpy(&a2, s + 8, 4);
  constexpr uint32_t kLow4 = 0x0F0F0F0F, kLow2 = 0x03030303;
  const uint32_t f0 = (a0 & kLow4) | ((a2 & kLow2) << 4);
  const uint32_t f1 = (a1 & kLow4) | (((a2 >> 2) & kLow2) << 4);
  const uint32_t f2 = ((a0 >> 4) & kLow4) | (((a2 >> 4) & kLow2) << 4);
  const uint32_t f3 = ((a1 >> 4) & kLow4) | (((a2 >> 6) & kLow2) << 4);
  return BytesFromU32s(f0, f1, f2, f3);
}

// Two consecutive halves at p as floats in lanes 0 and 1.
HWY_INLINE hn::Vec64<float> TwoHalves(const uint8_t* p) {
  const hn::Full64<float> df;
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, decltype(df)>(),
                                     reinterpret_cast<const hwy::float16_t*>(p)));
}

HWY_INLINE hn::Vec32<float> OneHalf(const uint8_t* p) {
  const hn::Full32<float> df;
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, decltype(df)>(),
                                     reinterpret_cast<const hwy::float16_t*>(p)));
}

// Lane 0 of v in every lane (vbroadcastss).
template <class V>
HWY_INLINE hn::Vec<DF> Broadcast0(V v) {
  return hn::Set(DF(), hn::GetLane(v));
}

// Q4_K and Q5_K. Group g is half (g % 2) of sub-block s = g / 2, whose codes are
// nibble s % 2 of qs[32 (g / 4) + 16 (g % 2) + l]. Q4_K keeps high nibbles in
// place (16 times the code, at most 240) and folds 1/16 into a, which is exact.
template <bool kQ5>
struct DecodeQ45K {
  static constexpr size_t kBytes = kQ5 ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  static constexpr size_t kChunkBytes = kBytes;
  static constexpr bool kChunkScale = true;
  static constexpr bool kHasTail = false;
  static constexpr size_t kQs = kQ5 ? offsetof(BlockQ5_K, qs) : offsetof(BlockQ4_K, qs);
  hn::Vec<DU32> idx[4], idx_h[4], nib, shift, rot;
  hn::Vec<DU8> spread_sc, spread_m;
  hn::Vec<DF> d_factor;
  DecodeQ45K() {
    for (int k = 0; k < 4; ++k) {
      idx[k] = LanesU32([k](int g) { return 8 * (g >> 2) + 4 * (g & 1) + k; });
      idx_h[k] = LanesU32([k](int g) { return 4 * (g & 1) + k; });  // qh dword
    }
    nib = LanesU32([](int g) { return ((g >> 1) & 1) ? 0xF0F0F0F0u : 0x0F0F0F0Fu; });
    shift = LanesU32([](int g) { return 4 * ((g >> 1) & 1); });
    rot = LanesU32([](int g) { return (4 - g / 2) & 31; });  // qh bit g / 2 -> bit 4
    // vpermb indices: byte 4g takes scale byte g / 2 (sc) or 8 + g / 2 (m).
    alignas(64) uint8_t isc[64] = {}, im[64] = {};
    for (int g = 0; g < 16; ++g) {
      isc[4 * g] = static_cast<uint8_t>(g / 2);
      im[4 * g] = static_cast<uint8_t>(8 + g / 2);
    }
    spread_sc = hn::Load(DU8(), isc);
    spread_m = hn::Load(DU8(), im);
    d_factor = LanesF32([](int g) { return (!kQ5 && ((g >> 1) & 1)) ? 1.0f / 16 : 1.0f; });
  }
  HWY_INLINE ChunkRegs operator()(const uint8_t* row, int64_t sb) const {
    const DU8 du8;
    const DU32 du32;
    const DF df;
    const uint8_t* blk = row + sb * kBytes;
    const auto q0 = hn::BitCast(du32, hn::LoadU(du8, blk + kQs));
    const auto q1 = hn::BitCast(du32, hn::LoadU(du8, blk + kQs + 64));
    ChunkRegs r;
    if constexpr (kQ5) {
      const auto qh = hn::BitCast(
          du32,
          hn::ZeroExtendVector(du8, hn::LoadU(hn::Half<DU8>(), blk + offsetof(BlockQ5_K, qh))));
      const auto low4 = hn::BitCast(du32, hn::Set(du8, 0x0F));
      const auto bit4 = hn::BitCast(du32, hn::Set(du8, 0x10));
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const auto lo = hn::And(TwoTablesLookupLanes32(q0, idx[k], q1) >> shift, low4);
        const auto hb =
            RotateLeftVar(hn::TableLookupLanes(qh, hn::IndicesFromVec(du32, idx_h[k])), rot);
        r.c[k] = hn::BitCast(du8, hn::OrAnd(lo, hb, bit4));  // lo | (hb & bit4)
      }
    } else {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k)
        r.c[k] = hn::BitCast(du8, hn::And(TwoTablesLookupLanes32(q0, idx[k], q1), nib));
    }
    const auto sm = ScalesMinsK4(blk + offsetof(BlockQ4_K, scales));
    const auto sc = hn::ConvertTo(df, BytesToDwords(spread_sc, sm));
    const auto mn = hn::ConvertTo(df, BytesToDwords(spread_m, sm));
    const auto dd = TwoHalves(blk);  // d, dmin (same offsets in both types)
    r.a = hn::Mul(sc, hn::Mul(Broadcast0(dd), d_factor));
    r.b = hn::Mul(mn, Broadcast0(hn::DupOdd(dd)));
    return r;
  }
};

// Q6_K: group g lies in 128-element half n = g / 8, quarter j = (g / 2) % 4; its
// low 4 bits are nibble j / 2 of ql[64 n + 32 (j % 2) + 16 (g % 2) + l], its high
// 2 bits bits 2j..2j+1 of qh[32 n + 16 (g % 2) + l].
struct DecodeQ6K {
  static constexpr size_t kChunkBytes = sizeof(BlockQ6_K);
  static constexpr bool kChunkScale = true;
  static constexpr bool kHasTail = false;
  hn::Vec<DU32> idx_l[4], idx_h[4], shift, rot;
  DecodeQ6K() {
    for (int k = 0; k < 4; ++k) {
      idx_l[k] =
          LanesU32([k](int g) { return 16 * (g / 8) + 8 * ((g / 2) % 2) + 4 * (g % 2) + k; });
      idx_h[k] = LanesU32([k](int g) { return 8 * (g / 8) + 4 * (g % 2) + k; });
    }
    shift = LanesU32([](int g) { return 4 * ((g / 4) % 2); });
    rot = LanesU32([](int g) { return (4 - 2 * ((g / 2) % 4)) & 31; });  // bits 2j -> 4
  }
  HWY_INLINE ChunkRegs operator()(const uint8_t* row, int64_t sb) const {
    const DU8 du8;
    const DU32 du32;
    const DI32 di32;
    const DF df;
    const uint8_t* blk = row + sb * sizeof(BlockQ6_K);
    const auto l0 = hn::BitCast(du32, hn::LoadU(du8, blk + offsetof(BlockQ6_K, ql)));
    const auto l1 = hn::BitCast(du32, hn::LoadU(du8, blk + offsetof(BlockQ6_K, ql) + 64));
    const auto qh = hn::BitCast(du32, hn::LoadU(du8, blk + offsetof(BlockQ6_K, qh)));
    const auto low4 = hn::BitCast(du32, hn::Set(du8, 0x0F));
    const auto bits45 = hn::BitCast(du32, hn::Set(du8, 0x30));
    ChunkRegs r;
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const auto lo = TwoTablesLookupLanes32(l0, idx_l[k], l1) >> shift;
      const auto hi = hn::And(
          RotateLeftVar(hn::TableLookupLanes(qh, hn::IndicesFromVec(du32, idx_h[k])), rot), bits45);
      r.c[k] = hn::BitCast(du8, hn::OrAnd(hi, lo, low4));  // (lo & low4) | hi
    }
    const hn::Rebind<int8_t, DI32> di8;
    const auto* scales = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
    const auto sc = hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, scales)));
    r.a = hn::Mul(sc, Broadcast0(OneHalf(blk + offsetof(BlockQ6_K, d))));
    r.b = hn::Mul(r.a, hn::Set(df, 32.0f));
    return r;
  }
};

// Q2_K and Q3_K: 2-bit codes, group g's at bits 2j..2j+1 (j = (g / 2) % 4) of
// qs[32 (g / 8) + 16 (g % 2) + l]; Q3_K adds 4 where bit g / 2 of
// hmask[16 (g % 2) + l] is set.
template <bool kQ3>
struct DecodeQ23K {
  static constexpr size_t kBytes = kQ3 ? sizeof(BlockQ3_K) : sizeof(BlockQ2_K);
  static constexpr size_t kChunkBytes = kBytes;
  static constexpr bool kChunkScale = true;
  static constexpr bool kHasTail = false;
  static constexpr size_t kQs = kQ3 ? offsetof(BlockQ3_K, qs) : offsetof(BlockQ2_K, qs);
  hn::Vec<DU32> idx[4], idx_h[4], shift, rot;
  DecodeQ23K() {
    for (int k = 0; k < 4; ++k) {
      idx[k] = LanesU32([k](int g) { return 8 * (g / 8) + 4 * (g % 2) + k; });
      idx_h[k] = LanesU32([k](int g) { return 4 * (g % 2) + k; });
    }
    shift = LanesU32([](int g) { return 2 * ((g / 2) % 4); });
    rot = LanesU32([](int g) { return (2 - g / 2) & 31; });  // hmask bit g / 2 -> bit 2
  }
  HWY_INLINE ChunkRegs operator()(const uint8_t* row, int64_t sb) const {
    const DU8 du8;
    const DU32 du32;
    const DI32 di32;
    const DF df;
    const uint8_t* blk = row + sb * kBytes;
    const auto qs = hn::BitCast(du32, hn::LoadU(du8, blk + kQs));
    const auto low2 = hn::BitCast(du32, hn::Set(du8, 0x03));
    ChunkRegs r;
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const auto lo =
          hn::And(hn::TableLookupLanes(qs, hn::IndicesFromVec(du32, idx[k])) >> shift, low2);
      if constexpr (kQ3) {
        const auto hm = hn::BitCast(
            du32, hn::ZeroExtendVector(
                      du8, hn::LoadU(hn::Half<DU8>(), blk + offsetof(BlockQ3_K, hmask))));
        const auto hb =
            RotateLeftVar(hn::TableLookupLanes(hm, hn::IndicesFromVec(du32, idx_h[k])), rot);
        r.c[k] = hn::BitCast(du8, hn::OrAnd(lo, hb, hn::BitCast(du32, hn::Set(du8, 0x04))));
      } else {
        r.c[k] = hn::BitCast(du8, lo);
      }
    }
    if constexpr (kQ3) {
      const auto sc = hn::ConvertTo(
          df, hn::Sub(hn::PromoteTo(di32, ScalesQ3K(blk + offsetof(BlockQ3_K, scales))),
                      hn::Set(di32, 32)));
      r.a = hn::Mul(sc, Broadcast0(OneHalf(blk + offsetof(BlockQ3_K, d))));
      r.b = hn::Mul(r.a, hn::Set(df, 4.0f));
    } else {
      const auto s = hn::PromoteTo(
          du32, hn::LoadU(hn::Rebind<uint8_t, DU32>(), blk + offsetof(BlockQ2_K, scales)));
      const auto dd = TwoHalves(blk + offsetof(BlockQ2_K, d));  // d, dmin
      r.a = hn::Mul(hn::ConvertTo(df, hn::BitCast(di32, hn::And(s, hn::Set(du32, 0xF)))),
                    Broadcast0(dd));
      r.b = hn::Mul(hn::ConvertTo(df, hn::BitCast(di32, hn::ShiftRight<4>(s))),
                    Broadcast0(hn::DupOdd(dd)));
    }
    return r;
  }
};

void KQuantChunk(const MatmulChunk& c) {
  const RowShape shape{c.K / kChunk, 0};  // one chunk per super-block
  switch (c.type) {
    case DType::Q4_K:
      return RegisterColumns<DecodeQ45K<false>>(c, shape);
    case DType::Q5_K:
      return RegisterColumns<DecodeQ45K<true>>(c, shape);
    case DType::Q6_K:
      return RegisterColumns<DecodeQ6K>(c, shape);
    case DType::Q2_K:
      return RegisterColumns<DecodeQ23K<false>>(c, shape);
    case DType::Q3_K:
      return RegisterColumns<DecodeQ23K<true>>(c, shape);
    default:
      return;  // the driver sends only the types above
  }
}
#else
void KQuantChunk(const MatmulChunk& c) { PortableKQuant(c); }
#endif  // HWY_TARGET == HWY_AVX3_DL

#else   // HWY_SCALAR: use the dequantizing fallback.
void KQuantChunk(const MatmulChunk& c) { matmul_chunk_dequant(c); }
#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/target_kernels.h"

namespace tandem::kernels::cpu {
HWY_EXPORT(KQuantChunk);
void resolve_matmul_kquant(size_t index, TargetKernels& k) {
  k.matmul_kquant = dispatch_entry(HWY_DISPATCH_TABLE(KQuantChunk), index);
}
}  // namespace tandem::kernels::cpu
#endif
