// Matmul for the legacy 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
// against activations with one scale per 32 elements. Eight blocks make one
// activation chunk (the last chunk of a row may hold fewer; the activations are
// zero past K). Group g of a chunk is half g % 2 of block g / 2, so each block
// decodes into the form of quant_tile-inl.h with an unsigned code u and
//   Q4_0: u = q,       a = d, b = 8 d       Q4_1: u = q, a = d, b = -m
//   Q5_0: u = q,       a = d, b = 16 d      Q5_1: u = q, a = d, b = -m
//   Q8_0: u = q + 128, a = d, b = 128 d
// for both its groups (w = a u - b).
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_legacy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
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

constexpr int kBlocksPerChunk = kChunk / kQK;  // 8

HWY_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// Per-type layout facts: block size, where the codes, the high bits and the
// min sit, and the offset b as a multiple of d for the types without a min.
struct LayoutQ4_0 {
  static constexpr size_t kBytes = sizeof(BlockQ4_0), kQs = offsetof(BlockQ4_0, qs);
  static constexpr bool kHigh = false, kMin = false, kByte = false;
  static constexpr size_t kQh = 0;
  static constexpr float kOffset = 8.0f;
};
struct LayoutQ4_1 {
  static constexpr size_t kBytes = sizeof(BlockQ4_1), kQs = offsetof(BlockQ4_1, qs);
  static constexpr bool kHigh = false, kMin = true, kByte = false;
  static constexpr size_t kQh = 0;
  static constexpr float kOffset = 0.0f;
};
struct LayoutQ5_0 {
  static constexpr size_t kBytes = sizeof(BlockQ5_0), kQs = offsetof(BlockQ5_0, qs);
  static constexpr bool kHigh = true, kMin = false, kByte = false;
  static constexpr size_t kQh = offsetof(BlockQ5_0, qh);
  static constexpr float kOffset = 16.0f;
};
struct LayoutQ5_1 {
  static constexpr size_t kBytes = sizeof(BlockQ5_1), kQs = offsetof(BlockQ5_1, qs);
  static constexpr bool kHigh = true, kMin = true, kByte = false;
  static constexpr size_t kQh = offsetof(BlockQ5_1, qh);
  static constexpr float kOffset = 0.0f;
};
struct LayoutQ8_0 {
  static constexpr size_t kBytes = sizeof(BlockQ8_0), kQs = offsetof(BlockQ8_0, qs);
  static constexpr bool kHigh = false, kMin = false, kByte = true;
  static constexpr size_t kQh = 0;
  static constexpr float kOffset = 128.0f;
};

// ---------------------------------------------------------------------------
// Portable unpacker: natural-order codes of one block (32), then the chunk layout.

using D16 = hn::CappedTag<uint8_t, 16>;  // unpacking works on 16 packed bytes at a time

// Adds 16 to the codes whose bit j is set in the 32-bit mask qh (Q5 high bits):
// byte j of the block takes bit j % 8 of qh byte j / 8.
HWY_INLINE void AddHighBits(const uint8_t* qh, uint8_t* u) {
  const D16 d;  // exactly 16 lanes on every SIMD target
  alignas(16) static constexpr uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128,
                                                   1, 2, 4, 8, 16, 32, 64, 128};
  alignas(16) static constexpr uint8_t kByte[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                    2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  uint32_t bits32;
  std::memcpy(&bits32, qh, 4);  // broadcast, not via a stack array (store forwarding)
  const auto packed = hn::BitCast(d, hn::Set(hn::Repartition<uint32_t, D16>(), bits32));
  for (int half = 0; half < 2; ++half) {
    const auto bytes = hn::TableLookupBytes(packed, hn::Load(d, kByte + 16 * half));
    const auto add = hn::ShiftLeft<4>(hn::Min(hn::And(bytes, hn::Load(d, kBit)), hn::Set(d, 1)));
    uint8_t* dst = u + 16 * half;
    hn::StoreU(hn::Add(hn::LoadU(d, dst), add), d, dst);
  }
}

template <class L>
HWY_INLINE void UnpackBlock(const uint8_t* blk, uint8_t* u, float* a, float* b) {
  const D16 d;
  const uint8_t* qs = blk + L::kQs;
  if constexpr (L::kByte) {  // signed q -> q + 128
    for (size_t i = 0; i < 32; i += hn::Lanes(d))
      hn::StoreU(hn::Xor(hn::LoadU(d, qs + i), hn::Set(d, 0x80)), d, u + i);
  } else {
    for (size_t i = 0; i < 16; i += hn::Lanes(d)) {
      const auto v = hn::LoadU(d, qs + i);
      hn::StoreU(hn::And(v, hn::Set(d, 0x0F)), d, u + i);
      hn::StoreU(hn::ShiftRight<4>(v), d, u + 16 + i);
    }
    if constexpr (L::kHigh) AddHighBits(blk + L::kQh, u);
  }
  const float scale = HalfAt(blk);
  a[0] = a[1] = scale;
  b[0] = b[1] = L::kMin ? -HalfAt(blk + 2) : L::kOffset * scale;
}

// Blocks [0, nb) of a row; the padding of the last chunk decodes as zeros.
template <class L>
HWY_INLINE void UnpackLegacyRow(const uint8_t* src, int64_t nb, UnpackedRow& row) {
  alignas(64) uint8_t natural[kChunk];
  const int64_t nch = static_cast<int64_t>(row.codes.size()) / kChunk;
  uint8_t* codes = row.codes.data();
  float* a = row.a.data();
  float* b = row.b.data();
  for (int64_t c = 0; c < nch; ++c) {
    for (int i = 0; i < kBlocksPerChunk; ++i) {
      const int64_t blk = c * kBlocksPerChunk + i;
      if (blk < nb) {
        UnpackBlock<L>(src + blk * L::kBytes, natural + kQK * i, a + 2 * blk, b + 2 * blk);
      } else {
        std::memset(natural + kQK * i, 0, kQK);
        a[2 * blk] = a[2 * blk + 1] = b[2 * blk] = b[2 * blk + 1] = 0.0f;
      }
    }
    ToChunkLayout(natural, codes + c * kChunk);
  }
}

template <class L>
HWY_INLINE void PortableType(const MatmulChunk& c) {
  const int64_t nb = c.K / kQK;
  PortableColumns(c, [nb](const uint8_t* s, UnpackedRow& r) { UnpackLegacyRow<L>(s, nb, r); });
}

void PortableLegacy(const MatmulChunk& c) {
  switch (c.type) {
    case DType::Q4_0:
      return PortableType<LayoutQ4_0>(c);
    case DType::Q4_1:
      return PortableType<LayoutQ4_1>(c);
    case DType::Q5_0:
      return PortableType<LayoutQ5_0>(c);
    case DType::Q5_1:
      return PortableType<LayoutQ5_1>(c);
    case DType::Q8_0:
      return PortableType<LayoutQ8_0>(c);
    default:
      return;  // the driver sends only the types above
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// ---------------------------------------------------------------------------
// Raw x86 intrinsics of the register decoders below, each for an instruction
// that Highway 1.0.3 cannot express (vpermt2d: TwoTablesLookupLanes32 in
// quant_tile-inl.h; vpdpbusd: simd_dot-inl.h).

// vpermt2b (VBMI), bytes idx[i] of the 128 bytes lo:hi: Highway 1.0.3 has no
// two-table permute, and its byte lookups stay within 128-bit blocks.
HWY_INLINE hn::Vec<DU8> TwoTablesLookupBytes(hn::Vec<DU8> lo, hn::Vec<DU8> idx, hn::Vec<DU8> hi) {
  return hn::Vec<DU8>{_mm512_permutex2var_epi8(lo.raw, idx.raw, hi.raw)};
}

// vpermw: Highway 1.0.3's TableLookupLanes has no 16-bit lanes.
HWY_INLINE hn::Vec<DU16> TableLookupWords(hn::Vec<DU16> v, hn::Vec<DU16> idx) {
  return hn::Vec<DU16>{_mm512_permutexvar_epi16(idx.raw, v.raw)};
}

// vpshufbitqmb (BITALG), mask bit j = bit ctl[j] of the qword of `bits` holding
// byte j: Highway 1.0.3 has no bit gather.
HWY_INLINE hn::Mask<DU8> BitShuffleMask(hn::Vec<DU64> bits, hn::Vec<DU8> ctl) {
  return hn::Mask<DU8>{_mm512_bitshuffle_epi64_mask(bits.raw, ctl.raw)};
}
HWY_INLINE hn::Mask<hn::Half<DU8>> BitShuffleMask(hn::Vec<hn::Half<DU64>> bits,
                                                  hn::Vec<hn::Half<DU8>> ctl) {
  return hn::Mask<hn::Half<DU8>>{_mm256_bitshuffle_epi64_mask(bits.raw, ctl.raw)};
}

// vpmovdw, the low 16 bits of each dword: Highway 1.0.3's TruncateTo is vpermw
// plus a table load.
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DI32>> TruncateToU16(hn::Vec<DI32> v) {
  return hn::Vec<hn::Rebind<uint16_t, DI32>>{_mm512_cvtepi32_epi16(v.raw)};
}

// The Q8_0 gather of DecodeQ8_0: the 8-row tile spills registers, and there
// GCC's allocation follows the exact instructions. Highway 1.0.3's Combine (a
// zero-extension, then vinserti32x8) and its blends (IfThenElse: a merge-masked
// move tied to its destination; ConcatUpperLower: vpblendmw) compute the same
// but measured 2-6% slower at 8 rows (bench Matmul/Q8_0/M:8); with these two
// the loop compiles to the instructions it had before Highway.
//
// vinserti64x4, hi above lo (lo's upper half is not zeroed first).
HWY_INLINE hn::Vec<DU32> InsertUpper256(hn::Vec<hn::Half<DU32>> lo, hn::Vec<hn::Half<DU32>> hi) {
  return hn::Vec<DU32>{_mm512_inserti64x4(_mm512_castsi256_si512(lo.raw), hi.raw, 1)};
}
// vpblendmd with the constant mask 0xFF00: lanes 0-7 of lo, 8-15 of hi.
HWY_INLINE hn::Vec<DU32> BlendUpper256(hn::Vec<DU32> lo, hn::Vec<DU32> hi) {
  return hn::Vec<DU32>{_mm512_mask_blend_epi32(0xFF00, lo.raw, hi.raw)};
}

// ---------------------------------------------------------------------------
// Register decoders (AVX-512 VBMI/VNNI/BITALG). Lane g = 2i + h of c[k] holds
// elements 16h + 4k .. 16h + 4k + 3 of block i: dword k of the block's 16 code
// bytes, low nibble for h = 0, high for h = 1 (Q8_0: dword 4h + k of its 32).

// Mask of the lanes whose bits are set in `bits` (a constant or a flag: kmov).
template <class D>
HWY_INLINE hn::Mask<D> MaskOfBits(D d, uint64_t bits) {
  uint8_t bytes[8];
  std::memcpy(bytes, &bits, 8);
  return hn::LoadMaskBits(d, bytes);
}

// 64 bytes of a chunk from byte `at`: a plain load when the chunk is whole
// (kFull), else masked to its first `valid` bytes, never reading past them.
template <bool kFull>
HWY_INLINE hn::Vec<DU8> Window(const uint8_t* base, int at, int valid) {
  const DU8 du8;
  if constexpr (kFull) return hn::LoadU(du8, base + at);
  const int left = valid - at;
  const uint64_t bits = left >= 64 ? ~uint64_t{0} : left <= 0 ? 0 : (uint64_t{1} << left) - 1;
  return hn::MaskedLoad(MaskOfBits(du8, bits), du8, base + at);
}

// 64 byte indices into a pair of windows from f(result byte).
template <class F>
HWY_INLINE hn::Vec<DU8> ByteIndices(F f) {
  alignas(64) uint8_t v[64];
  for (int e = 0; e < 64; ++e) v[e] = static_cast<uint8_t>(f(e));
  return hn::Load(DU8(), v);
}

// Q4_0, Q4_1, Q5_0, Q5_1: a chunk is 144 to 192 bytes, three 64-byte windows:
// W0 and W1 its first 128 bytes, W2 its last 64 (overlapping W1, so that no load
// reads past the chunk and none needs a mask). Byte permutes pick from them the
// code bytes of blocks 0-3 (in W0:W1) and 4-7 (in W1:W2) as the 128-bit lanes of
// z0 and z1, and the first 8 bytes of every block (d, m, qh) as the qwords of a
// header vector; then one dword permute per k gathers c[k] from z0:z1.
template <class L>
struct DecodeNibbles {
  static constexpr int kBytes = static_cast<int>(L::kBytes);
  static constexpr int kQs = static_cast<int>(L::kQs);
  static constexpr size_t kChunkBytes = kBlocksPerChunk * L::kBytes;
  static constexpr bool kChunkScale = false;
  static constexpr bool kHasTail = true;
  static_assert(3 * kBytes + kQs + 16 <= 128 && 4 * kBytes + kQs >= 64 && 3 * kBytes + 8 <= 128 &&
                    kChunkBytes >= 128 && kChunkBytes <= 192,
                "code bytes and the first four headers must fit the windows");
  hn::Vec<DU32> idx[4], nib, shift;
  hn::Vec<DU8> ctl[4], z0_idx, z1_idx, head_lo_idx, head_hi_idx;
  hn::Vec<DU16> d_idx, m_idx;
  hn::Mask<DU64> head_hi;  // header qwords taken from W1:W2
  hn::Vec<DF> a_factor;

  static constexpr int kW2 = static_cast<int>(kChunkBytes) - 64;  // W2's first byte
  // Index into the table pair (W1, W2) of chunk byte `at` (64 <= at < 192).
  static constexpr int W12Index(int at) { return at < 128 ? at - 64 : 64 + at - kW2; }

  DecodeNibbles() {
    for (int k = 0; k < 4; ++k) {
      idx[k] = LanesU32([k](int g) { return 4 * (g >> 1) + k; });
      // High bits: byte 4h + b of qword i selects bit 16h + 4k + b of block i's qh.
      ctl[k] = ByteIndices([k](int e) { return 16 * ((e / 4) % 2) + 4 * k + e % 4; });
    }
    nib = LanesU32([](int g) { return (g & 1) ? 0xF0F0F0F0u : 0x0F0F0F0Fu; });
    shift = LanesU32([](int g) { return 4 * (g & 1); });
    z0_idx = ByteIndices([](int e) { return (e / 16) * kBytes + kQs + e % 16; });
    z1_idx = ByteIndices([](int e) { return W12Index((4 + e / 16) * kBytes + kQs + e % 16); });
    uint64_t head_hi_bits = 0;
    for (int i = 0; i < 8; ++i)
      if (i * kBytes + 8 > 128) head_hi_bits |= uint64_t{1} << i;
    head_hi = MaskOfBits(DU64(), head_hi_bits);
    head_lo_idx = ByteIndices([](int e) {
      const int at = (e / 8) * kBytes + e % 8;
      return at < 128 ? at : 0;
    });
    head_hi_idx = ByteIndices([](int e) {
      const int at = (e / 8) * kBytes + e % 8;
      return at >= 64 ? W12Index(at) : 0;
    });
    // Words of the header: d of block i is word 4i, m word 4i + 1; lanes 2i, 2i + 1.
    alignas(64) uint16_t dw[32] = {}, mw[32] = {};
    for (int j = 0; j < 16; ++j) {
      dw[j] = static_cast<uint16_t>(4 * (j / 2));
      mw[j] = static_cast<uint16_t>(4 * (j / 2) + 1);
    }
    d_idx = hn::Load(DU16(), dw);
    m_idx = hn::Load(DU16(), mw);
    // Q4 high nibbles stay in place (16 times the code): fold 1/16 into a (exact).
    a_factor = LanesF32([](int g) { return (!L::kHigh && (g & 1)) ? 1.0f / 16 : 1.0f; });
  }

  HWY_INLINE ChunkRegs operator()(const uint8_t* row, int64_t ch) const {
    return Decode<true>(row + ch * kChunkBytes, kBlocksPerChunk * kBytes);
  }
  HWY_INLINE ChunkRegs Masked(const uint8_t* row, int64_t ch, int tail) const {
    return Decode<false>(row + ch * kChunkBytes, tail * kBytes);
  }

  // The halves d and m of the header's blocks as floats, lane 2i + h from block i.
  HWY_INLINE hn::Vec<hn::Rebind<hwy::float16_t, DF>> HeaderHalves(hn::Vec<DU8> head,
                                                                  hn::Vec<DU16> word_idx) const {
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::BitCast(df16, hn::LowerHalf(TableLookupWords(hn::BitCast(DU16(), head), word_idx)));
  }

  // A tail of at most four blocks: all in W0:W1, groups 0-7 in 256-bit vectors.
  HWY_INLINE HalfRegs Half(const uint8_t* row, int64_t ch, int tail) const {
    const DU32 du32;
    const hn::Half<DU8> dh8;
    const hn::Half<DF> dhf;
    const uint8_t* base = row + ch * kChunkBytes;
    const int valid = tail * kBytes;
    const auto w0 = Window<false>(base, 0, valid);
    const auto w1 = Window<false>(base, 64, valid);
    const auto z0 = hn::BitCast(du32, TwoTablesLookupBytes(w0, z0_idx, w1));
    const auto head = TwoTablesLookupBytes(w0, head_lo_idx, w1);
    HalfRegs r;
    if constexpr (L::kHigh) {
      const auto qh =
          hn::LowerHalf(hn::ShiftRight<8 * static_cast<int>(L::kQh)>(hn::BitCast(DU64(), head)));
      const auto low4 = hn::Set(dh8, 0x0F), sixteen = hn::Set(dh8, 16);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const auto lo = hn::And(hn::BitCast(dh8, hn::LowerHalf(hn::TableLookupLanes(
                                                     z0, hn::IndicesFromVec(du32, idx[k]))) >>
                                                     hn::LowerHalf(shift)),
                                low4);
        r.c[k] =
            hn::IfThenElse(BitShuffleMask(qh, hn::LowerHalf(ctl[k])), hn::Add(lo, sixteen), lo);
      }
    } else {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k)
        r.c[k] = hn::BitCast(
            dh8, hn::And(hn::LowerHalf(hn::TableLookupLanes(z0, hn::IndicesFromVec(du32, idx[k]))),
                         hn::LowerHalf(nib)));
    }
    const auto d = hn::PromoteTo(dhf, hn::LowerHalf(HeaderHalves(head, d_idx)));
    r.a = hn::Mul(d, hn::LowerHalf(a_factor));
    if constexpr (L::kMin) {
      r.b = hn::Neg(hn::PromoteTo(dhf, hn::LowerHalf(HeaderHalves(head, m_idx))));  // -m
    } else {
      r.b = hn::Mul(d, hn::Set(dhf, L::kOffset));
    }
    return r;
  }

  template <bool kFull>
  HWY_INLINE ChunkRegs Decode(const uint8_t* base, int valid) const {
    const DU8 du8;
    const DU32 du32;
    const DF df;
    const auto w0 = Window<kFull>(base, 0, valid);
    const auto w1 = Window<kFull>(base, 64, valid);
    const auto w2 = Window<kFull>(base, kW2, valid);
    const auto z0 = hn::BitCast(du32, TwoTablesLookupBytes(w0, z0_idx, w1));
    const auto z1 = hn::BitCast(du32, TwoTablesLookupBytes(w1, z1_idx, w2));
    const auto head = hn::BitCast(
        du8, hn::IfThenElse(head_hi, hn::BitCast(DU64(), TwoTablesLookupBytes(w1, head_hi_idx, w2)),
                            hn::BitCast(DU64(), TwoTablesLookupBytes(w0, head_lo_idx, w1))));
    ChunkRegs r;
    if constexpr (L::kHigh) {
      const auto qh = hn::ShiftRight<8 * static_cast<int>(L::kQh)>(hn::BitCast(DU64(), head));
      const auto low4 = hn::Set(du8, 0x0F), sixteen = hn::Set(du8, 16);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const auto lo =
            hn::And(hn::BitCast(du8, TwoTablesLookupLanes32(z0, idx[k], z1) >> shift), low4);
        r.c[k] = hn::IfThenElse(BitShuffleMask(qh, ctl[k]), hn::Add(lo, sixteen), lo);
      }
    } else {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k)
        r.c[k] = hn::BitCast(du8, hn::And(TwoTablesLookupLanes32(z0, idx[k], z1), nib));
    }
    // Past a tail chunk's blocks the header is zero, so a = b = 0 there.
    const auto d = hn::PromoteTo(df, HeaderHalves(head, d_idx));
    r.a = hn::Mul(d, a_factor);
    if constexpr (L::kMin) {
      r.b = hn::Neg(hn::PromoteTo(df, HeaderHalves(head, m_idx)));  // -m
    } else {
      r.b = hn::Mul(d, hn::Set(df, L::kOffset));
    }
    return r;
  }
};

// Q8_0: the blocks' 32 code bytes go two by two into four vectors (256-bit lanes);
// two dword permutes and a blend per k gather c[k]. The scales come from masked
// broadcasts of each block's first dword.
struct DecodeQ8_0 {
  static constexpr int kBytes = sizeof(BlockQ8_0);
  static constexpr size_t kChunkBytes = kBlocksPerChunk * sizeof(BlockQ8_0);
  static constexpr bool kChunkScale = false;
  static constexpr bool kHasTail = true;
  hn::Vec<DU32> idx[4];

  DecodeQ8_0() {
    for (int k = 0; k < 4; ++k)
      idx[k] = LanesU32([k](int g) { return 8 * ((g >> 1) & 3) + 4 * (g & 1) + k; });
  }

  HWY_INLINE ChunkRegs operator()(const uint8_t* row, int64_t ch) const {
    return Decode<false>(row + ch * kChunkBytes, kBlocksPerChunk);
  }
  HWY_INLINE ChunkRegs Masked(const uint8_t* row, int64_t ch, int tail) const {
    return Decode<true>(row + ch * kChunkBytes, tail);
  }
  // A tail of at most four blocks: groups 0-7 in 256-bit vectors.
  HWY_INLINE HalfRegs Half(const uint8_t* row, int64_t ch, int tail) const {
    const hn::Half<DU8> dh8;
    const hn::Half<DF> dhf;
    const uint8_t* base = row + ch * kChunkBytes;
    const auto za = TwoBlocks<true>(base, 0, tail), zb = TwoBlocks<true>(base, 1, tail);
    const auto flip = hn::Set(dh8, 0x80);  // q -> q + 128
    HalfRegs r;
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      r.c[k] =
          hn::Xor(hn::BitCast(dh8, hn::LowerHalf(TwoTablesLookupLanes32(za, idx[k], zb))), flip);
    const hn::Rebind<hwy::float16_t, decltype(dhf)> df16;
    r.a = hn::PromoteTo(dhf,
                        hn::BitCast(df16, hn::LowerHalf(TruncateToU16(Heads<true>(base, tail)))));
    r.b = hn::Mul(r.a, hn::Set(dhf, LayoutQ8_0::kOffset));
    return r;
  }

  // Lanes 2i, 2i + 1: block i's first dword (d in its low half), for i < n.
  template <bool kTail>
  HWY_INLINE hn::Vec<DI32> Heads(const uint8_t* base, int n) const {
    const DI32 di32;
    auto head = hn::Zero(di32);
#pragma GCC unroll 8
    for (int i = 0; i < kBlocksPerChunk; ++i) {
      if (kTail && i >= n) break;
      int32_t v;
      std::memcpy(&v, base + i * kBytes, 4);
      head = hn::IfThenElse(MaskOfBits(di32, 3u << (2 * i)), hn::Set(di32, v), head);
    }
    return head;
  }

  // Block i's 32 code bytes (zeros past the n blocks of a tail chunk).
  template <bool kTail>
  HWY_INLINE hn::Vec<hn::Half<DU32>> Codes(const uint8_t* base, int i, int n) const {
    const hn::Half<DU32> d;
    const uint8_t* p = base + i * kBytes + offsetof(BlockQ8_0, qs);
    if constexpr (kTail)
      return hn::MaskedLoad(MaskOfBits(d, i < n ? 0xFF : 0), d,
                            reinterpret_cast<const uint32_t*>(p));
    return hn::BitCast(d, hn::LoadU(hn::Half<DU8>(), p));
  }
  // Blocks 2j and 2j + 1.
  template <bool kTail>
  HWY_INLINE hn::Vec<DU32> TwoBlocks(const uint8_t* base, int j, int n) const {
    return InsertUpper256(Codes<kTail>(base, 2 * j, n), Codes<kTail>(base, 2 * j + 1, n));
  }

  template <bool kTail>
  HWY_INLINE ChunkRegs Decode(const uint8_t* base, int n) const {
    const DU8 du8;
    const DU32 du32;
    const DF df;
    const auto za = TwoBlocks<kTail>(base, 0, n), zb = TwoBlocks<kTail>(base, 1, n);
    const auto zc = TwoBlocks<kTail>(base, 2, n), zd = TwoBlocks<kTail>(base, 3, n);
    const auto flip = hn::Set(du8, 0x80);  // q -> q + 128
    ChunkRegs r;
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      r.c[k] = hn::Xor(hn::BitCast(du8, BlendUpper256(TwoTablesLookupLanes32(za, idx[k], zb),
                                                      TwoTablesLookupLanes32(zc, idx[k], zd))),
                       flip);
    const hn::Rebind<hwy::float16_t, DF> df16;
    r.a = hn::PromoteTo(df, hn::BitCast(df16, TruncateToU16(Heads<kTail>(base, n))));
    r.b = hn::Mul(r.a, hn::Set(df, LayoutQ8_0::kOffset));
    return r;
  }
};

void LegacyChunk(const MatmulChunk& c) {
  const int64_t nb = c.K / kQK;
  const RowShape shape{nb / kBlocksPerChunk, static_cast<int>(nb % kBlocksPerChunk)};
  switch (c.type) {
    case DType::Q4_0:
      return RegisterColumns<DecodeNibbles<LayoutQ4_0>>(c, shape);
    case DType::Q4_1:
      return RegisterColumns<DecodeNibbles<LayoutQ4_1>>(c, shape);
    case DType::Q5_0:
      return RegisterColumns<DecodeNibbles<LayoutQ5_0>>(c, shape);
    case DType::Q5_1:
      return RegisterColumns<DecodeNibbles<LayoutQ5_1>>(c, shape);
    case DType::Q8_0:
      return RegisterColumns<DecodeQ8_0>(c, shape);
    default:
      return;  // the driver sends only the types above
  }
}
#else
void LegacyChunk(const MatmulChunk& c) { PortableLegacy(c); }
#endif  // HWY_TARGET == HWY_AVX3_DL

#else   // HWY_SCALAR: no lane-exact integer tricks; use the dequantizing fallback.
void LegacyChunk(const MatmulChunk& c) { matmul_chunk_dequant(c); }
#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/target_kernels.h"

namespace tandem::kernels::cpu {
HWY_EXPORT(LegacyChunk);
void resolve_matmul_legacy(size_t index, TargetKernels& k) {
  k.matmul_legacy = dispatch_entry(HWY_DISPATCH_TABLE(LegacyChunk), index);
}
}  // namespace tandem::kernels::cpu
#endif
