// Matmul of Q4_K, Q6_K, Q4_0, Q4_1, Q5_0 and Q8_0 weights in the packed 16-row
// layout (packed_layout.h) against int8 activations (one scale per 256 elements
// for the K-quants, per 32 for the others), on AVX-512 VNNI and on AVX2 (other
// targets read the file layout: matmul_kquant.cpp, matmul_legacy.cpp).
//
// A panel of 16 weight rows meets up to kMaxTile activation rows at a time. Its
// codes are unpacked once per record into registers and applied to every
// activation row of the tile: per step of 4 elements one vpdpbusd per activation
// row, with the row's 4 activation bytes as a broadcast operand, and lane r
// holding weight row r's sum. A scale group (Q4_K: 32 elements, Q6_K: 16) is one
// integer chain; its float scale, and Q4_K's min, are applied once per group.
// Every activation row runs the same instructions whatever the tile, so results
// do not depend on which rows share a call (batch invariance).
//
// AVX2's vectors hold 8 lanes: a panel is taken as two parts of 8 rows, one
// after the other, the second reading the panel from cache (docs/decisions.md,
// "AVX2 in the packed layout"). A lane's arithmetic is the same on both targets
// (integer sums, then the same float steps per row), so AVX2 computes bit for
// bit what AVX3_DL does; its products' pair sums add in 16 bits within a scale
// group (GroupSum).
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_packed.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul_chunk.h"
#include "kernels/cpu/packed_layout.h"
#include "kernels/cpu/simd_dot-inl.h"

HWY_BEFORE_NAMESPACE();
#if HWY_TARGET == HWY_AVX3_DL  // see hwy_targets.h
#pragma GCC target("avx512vnni")
#endif
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
// Highway ops only: the raw intrinsics this file needs (vpdpbusd, vpmaddubsw,
// prefetcht1 and prefetchnta) are the shared helpers of simd_dot-inl.h.
//
// Activation rows per tile: 3 accumulators each, in 32 registers (AVX3_DL) or 16
// (AVX2).
constexpr int kMaxTile = HWY_TARGET == HWY_AVX2 ? 4 : 8;
constexpr int kLanes = HWY_MAX_BYTES / 4;    // weight rows per vector: 16, or 8 on AVX2
constexpr int kParts = kPanelRows / kLanes;  // vectors per panel row: 1, or 2 on AVX2
constexpr int kPartBytes = HWY_MAX_BYTES;    // a part's bytes of a 64-byte code vector

using DU8 = hn::ScalableTag<uint8_t>;  // 512 bits on AVX3_DL, 256 on AVX2
using DI8 = hn::ScalableTag<int8_t>;
using DU16 = hn::ScalableTag<uint16_t>;
using DI32 = hn::ScalableTag<int32_t>;
using DF = hn::ScalableTag<float>;
using VU8 = hn::Vec<DU8>;
using VI32 = hn::Vec<DI32>;
using VF = hn::Vec<DF>;

// How a tile prefetches the weight stream: `bytes` ahead of the record it
// computes (0: it does not; only a panel's first tile does), non-temporally
// where no later tile reads the panel again (PackedChunk).
struct StreamLead {
  int64_t bytes = 0;
  bool non_temporal = false;
};

// The weights a record will read `lead.bytes` from now, prefetched in `Parts`
// slices, one slice per step of its computation, so that requests to memory
// keep flowing while a record computes: issued as one burst at the start of
// each record they do not overlap with its computation, and a matrix streamed
// at several activation rows costs its streaming plus all of the rows' compute
// (docs/decisions.md, "Prefetches spread over a record").
template <size_t Bytes, int Parts>
class RecordPrefetch {
 public:
  RecordPrefetch(const uint8_t* rec, StreamLead lead)
      : at_(lead.bytes > 0 ? rec + lead.bytes : nullptr), non_temporal_(lead.non_temporal) {}
  HWY_INLINE void part(int k) const {
    if (!at_) return;
    for (size_t l = kLines * k / Parts; l < kLines * (k + 1) / Parts; ++l)
      PrefetchStream(at_ + 64 * l, non_temporal_);
  }

 private:
  static constexpr size_t kLines = (Bytes + 63) / 64;
  const uint8_t* at_;
  bool non_temporal_;
};

// Four activation bytes (one step) of activation row r, as a broadcast operand.
HWY_INLINE hn::Vec<DI8> Step(const int8_t* q, int offset) {
  int32_t v;
  std::memcpy(&v, q + offset, 4);
  return hn::BitCast(DI8(), hn::Set(DI32(), v));
}

// acc + the u8 x i8 products of each dword's four bytes (vpdpbusd), for codes up
// to 128 (every type but Q8_0: DotU8S8Small's condition).
HWY_INLINE VI32 Dot(VI32 acc, VU8 w, hn::Vec<DI8> x) { return DotU8S8Small(DU8(), acc, w, x); }
// The same for any codes (Q8_0's reach 255).
HWY_INLINE VI32 DotWide(VI32 acc, VU8 w, hn::Vec<DI8> x) { return DotU8S8(DU8(), acc, w, x); }

// The integer sum of one scale group's products (Dot's), an i32 lane per weight
// row, taking product `term` (0, 1, 2, ... in the group's order; a constant
// once the caller's loops are unrolled). On AVX2 the vpmaddubsw pair sums go
// into 16-bit lanes, widened by one vpmaddwd every kTerms products and at the
// end, instead of a vpmaddwd and a vpaddd for each: a third fewer instructions
// a product, the same integers (docs/decisions.md, "AVX2 in the packed
// layout"). kTerms = WordTerms(the codes' maximum) keeps every 16-bit sum exact.
// Elsewhere each product goes straight into 32 bits.
constexpr int WordTerms(int max_code) { return 32767 / (2 * max_code * 127); }

template <int kTerms>
class GroupSum {
  static_assert(kTerms >= 1, "a pair sum of these codes does not fit 16 bits");

 public:
  GroupSum() : sum_(hn::Zero(DI32())) {}
  explicit GroupSum(VI32 start) : sum_(start) {}
  HWY_INLINE void Add(int term, VU8 w, hn::Vec<DI8> x) {
#if HWY_TARGET == HWY_AVX2
    const auto pairs = MaddubsPairs(w, x);
    if (term % kTerms != 0) {
      words_ = hn::Add(words_, pairs);
      return;
    }
    if (term > 0) Widen();
    words_ = pairs;
#else
    (void)term;
    sum_ = Dot(sum_, w, x);
#endif
  }
  // The sum, once every product has been added (at least one).
  HWY_INLINE VI32 Sum() {
#if HWY_TARGET == HWY_AVX2
    Widen();
#endif
    return sum_;
  }

 private:
  VI32 sum_;
#if HWY_TARGET == HWY_AVX2
  HWY_INLINE void Widen() { sum_ = hn::Add(sum_, SumPairsI16(words_)); }
  hn::Vec<hn::ScalableTag<int16_t>> words_;
#endif
};

HWY_INLINE VF HalvesToFloats(const uint8_t* p) {
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::PromoteTo(DF(), hn::Load(df16, reinterpret_cast<const hwy::float16_t*>(p)));
}

// A vector's lanes' worth of bytes at p (aligned to that size) widened to floats.
HWY_INLINE VF U8ToFloats(const uint8_t* p) {
  const DI32 di32;
  return hn::ConvertTo(DF(), hn::PromoteTo(di32, hn::Load(hn::Rebind<uint8_t, DI32>(), p)));
}
HWY_INLINE VF I8ToFloats(const uint8_t* p) {
  const DI32 di32;
  return hn::ConvertTo(DF(), hn::PromoteTo(di32, hn::Load(hn::Rebind<int8_t, DI32>(),
                                                          reinterpret_cast<const int8_t*>(p))));
}

// Byte vectors shifted within their 16-bit lanes (vpsllw, vpsrlw).
template <int kBits>
HWY_INLINE VU8 ShiftLeftWords(VU8 v) {
  return hn::BitCast(DU8(), hn::ShiftLeft<kBits>(hn::BitCast(DU16(), v)));
}
template <int kBits>
HWY_INLINE VU8 ShiftRightWords(VU8 v) {
  return hn::BitCast(DU8(), hn::ShiftRight<kBits>(hn::BitCast(DU16(), v)));
}

// The activation rows of a tile: codes, scales and derived sums.
template <int R>
struct TileActs {
  const int8_t* q[R];
  const float* gd[R];
  const float* sum32[R];
  const int32_t* q6_offset[R];
  const int32_t* q4_offset[R];
  TileActs(const QActs& x, int m0) {
    for (int r = 0; r < R; ++r) {
      q[r] = x.row_q(m0 + r);
      gd[r] = x.row_gd(m0 + r);
      sum32[r] = x.row_sum32(m0 + r);
      q6_offset[r] = x.q6_offset.empty() ? nullptr : x.row_q6_offset(m0 + r);  // block 256 only
      q4_offset[r] = x.q4_offset.empty() ? nullptr : x.row_q4_offset(m0 + r);  // block 32 only
    }
  }
};

// Where part `p` of a panel's rows (rows kLanes p .. kLanes p + kLanes - 1) finds
// its share of a record's arrays, relative to the array's start: in each 64-byte
// vector of codes, among the per-row bytes (scales), among the per-row halves.
struct PartAt {
  int codes, bytes, halves;
  explicit PartAt(int p) : codes(kPartBytes * p), bytes(kLanes * p), halves(2 * kLanes * p) {}
};

// Records [begin, end) of a panel. A span that starts the panel starts the sums
// of its output columns from zero; a later one goes on from the sums the span
// before it left in y, so that the float steps come in the same order however
// the panel is cut.
struct Records {
  int64_t begin, end;
  HWY_INLINE VF Start(DF df, const float* y) const {
    return begin == 0 ? hn::Zero(df) : hn::LoadU(df, y);
  }
};

// Q4_K: super-blocks [span.begin, span.end) of one panel, activation rows
// m0..m0+R-1. In the
// activations' chunk layout (activations.h) elements 4t..4t+3 sit at byte
// 64 (t % 4) + 4 (t / 4): step i of sub-block s is at 64i + 8s, of its upper
// half at 64i + 8s + 4.
template <int R>
HWY_NOINLINE void PanelQ4K(const uint8_t* panel, Records span, const TileActs<R>& x, PartAt at,
                           StreamLead prefetch, float* y, int64_t ldy) {
  // Short tiles take two chains per row (lower and upper half of a sub-block), so
  // that the dot-product latency is hidden; integer sums, so the split cannot
  // change a result.
  constexpr bool kSplit = R < 4;
  const DU8 du8;
  const DF df;
  const VU8 low4 = hn::Set(du8, 0x0F);
  VF acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = span.Start(df, y + r * ldy);
  for (int64_t sb = span.begin; sb < span.end; ++sb) {
    const uint8_t* rec = panel + sb * kQ4KRecordBytes;
    const RecordPrefetch<kQ4KRecordBytes, 32> fetch(rec, prefetch);
    const VF d = HalvesToFloats(rec + 2304 + at.halves);
    const VF dmin = HalvesToFloats(rec + 2336 + at.halves);
    VF f[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) f[r] = hn::Zero(df);
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const uint8_t* sc = rec + 2048 + 32 * s + at.bytes;
      const VF a = hn::Mul(U8ToFloats(sc), d);
      const VF b = hn::Mul(U8ToFloats(sc + 16), dmin);
      GroupSum<WordTerms(15)> lo_sum[R], hi_sum[R];  // a sub-block's 32 products fit
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        fetch.part(4 * s + i);
        const VU8 v = hn::Load(du8, rec + 64 * (4 * s + i) + at.codes);
        const VU8 lo = hn::And(v, low4);
        const VU8 hi = hn::And(ShiftRightWords<4>(v), low4);
        const int off = 64 * i + 8 * s;
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int64_t base = sb * 256;
          if constexpr (kSplit) {
            lo_sum[r].Add(i, lo, Step(x.q[r] + base, off));
            hi_sum[r].Add(i, hi, Step(x.q[r] + base, off + 4));
          } else {
            lo_sum[r].Add(2 * i, lo, Step(x.q[r] + base, off));
            lo_sum[r].Add(2 * i + 1, hi, Step(x.q[r] + base, off + 4));
          }
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const VI32 sum = kSplit ? hn::Add(lo_sum[r].Sum(), hi_sum[r].Sum()) : lo_sum[r].Sum();
        f[r] = hn::MulAdd(hn::ConvertTo(df, sum), a, f[r]);
        f[r] = hn::NegMulAdd(b, hn::Set(df, x.sum32[r][sb * 8 + s]), f[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = hn::MulAdd(f[r], hn::Set(df, x.gd[r][sb * 16]), acc[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) hn::StoreU(acc[r], df, y + r * ldy);
}

// Q6_K: as PanelQ4K; group g's step i is at 64i + 4g, and its chain starts from
// -32 times the group's activation sum (the codes' offset of 32).
//
// Short tiles run a group pair's two chains side by side (that hides the
// dot-product latency); longer ones have chains enough in their rows, and take
// one group at a time so that chains, codes and accumulators fit the 32
// registers (two groups at once spill at 6 rows). Either way a group is one
// integer chain in the same order and the float steps come in the same order,
// so results are bit-identical. Every loop over the tile's rows is unrolled:
// one that is not keeps the chains in memory instead of registers.
template <int R>
HWY_NOINLINE void PanelQ6K(const uint8_t* panel, Records span, const TileActs<R>& x, PartAt at,
                           StreamLead prefetch, float* y, int64_t ldy) {
  constexpr bool kPairs = R < 4;
  const DU8 du8;
  const DI32 di32;
  const DF df;
  const VU8 low4 = hn::Set(du8, 0x0F), bits45 = hn::Set(du8, 0x30);
  using Q6Sum = GroupSum<WordTerms(63)>;  // codes 0..63 (the offset of 32 is in the start)
  VF acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = span.Start(df, y + r * ldy);
  for (int64_t sb = span.begin; sb < span.end; ++sb) {
    const uint8_t* rec = panel + sb * kQ6KRecordBytes;
    const RecordPrefetch<kQ6KRecordBytes, 32> fetch(rec, prefetch);
    const VF d = HalvesToFloats(rec + kQ6KdAt + at.halves);
    auto scale = [&](int g) __attribute__((always_inline)) {
      return hn::Mul(I8ToFloats(rec + kQ6KScalesAt + 16 * g + at.bytes), d);
    };
    // Codes of group 2h + j, step i: (high bits & 0x30) | low nibble. Bits
    // 2k..2k+1 of hv go to bits 4..5, k = (2h + j) % 4.
    auto codes = [&](int h, int j, int i) __attribute__((always_inline)) {
      const VU8 v = hn::Load(du8, rec + 64 * q6k_low_vector(h, i) + at.codes);
      const VU8 hv = hn::Load(du8, rec + 64 * q6k_high_vector(h / 2, i) + at.codes);
      if (j == 0)
        return hn::OrAnd(hn::And(v, low4), h % 2 == 0 ? ShiftLeftWords<4>(hv) : hv, bits45);
      return hn::OrAnd(hn::And(ShiftRightWords<4>(v), low4),
                       h % 2 == 0 ? ShiftLeftWords<2>(hv) : ShiftRightWords<2>(hv), bits45);
    };
    VF f[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) f[r] = hn::Zero(df);
#pragma GCC unroll 8
    for (int h = 0; h < 8; ++h) {
      if constexpr (kPairs) {
        const int g0 = 2 * h, g1 = 2 * h + 1;
        const VF a0 = scale(g0), a1 = scale(g1);
        Q6Sum s0[R], s1[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          s0[r] = Q6Sum(hn::Set(di32, x.q6_offset[r][sb * 16 + g0]));
          s1[r] = Q6Sum(hn::Set(di32, x.q6_offset[r][sb * 16 + g1]));
        }
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          fetch.part(4 * h + i);
          const VU8 c0 = codes(h, 0, i), c1 = codes(h, 1, i);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const int8_t* q = x.q[r] + sb * 256;
            s0[r].Add(i, c0, Step(q, 64 * i + 4 * g0));
            s1[r].Add(i, c1, Step(q, 64 * i + 4 * g1));
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          f[r] = hn::MulAdd(hn::ConvertTo(df, s0[r].Sum()), a0, f[r]);
          f[r] = hn::MulAdd(hn::ConvertTo(df, s1[r].Sum()), a1, f[r]);
        }
      } else {
#pragma GCC unroll 2
        for (int j = 0; j < 2; ++j) {
          const int g = 2 * h + j;
          Q6Sum s[R];
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) s[r] = Q6Sum(hn::Set(di32, x.q6_offset[r][sb * 16 + g]));
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) {
            if (j == 0) fetch.part(4 * h + i);
            const VU8 c = codes(h, j, i);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) s[r].Add(i, c, Step(x.q[r] + sb * 256, 64 * i + 4 * g));
          }
          const VF a = scale(g);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) f[r] = hn::MulAdd(hn::ConvertTo(df, s[r].Sum()), a, f[r]);
        }
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = hn::MulAdd(f[r], hn::Set(df, x.gd[r][sb * 16]), acc[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) hn::StoreU(acc[r], df, y + r * ldy);
}

// Legacy types, records of two 32-element blocks. Block b of a row lies in
// activation chunk b / 8 at groups 2 (b % 8) and 2 (b % 8) + 1, so its step i is
// at byte 64 (i % 4) + 8 (b % 8) + 4 (i / 4) of the chunk. A block's chain starts
// from -offset times its activation sum (Q4_0: 8, Q5_0: 16, Q8_0: 128); Q4_1
// adds m times the sum instead.
template <DType T>
struct LegacyRecord;
// kOffsetShift: the offset is 8 << kOffsetShift (-1: none), so that a chain
// starts from the activations' -8 times the block's sum (QActs::q4_offset)
// shifted.
template <>
struct LegacyRecord<DType::Q4_0> {
  static constexpr size_t kBytes = kQ4_0RecordBytes, kD = 512;
  static constexpr int kOffsetShift = 0;
};
template <>
struct LegacyRecord<DType::Q4_1> {
  static constexpr size_t kBytes = kQ4_1RecordBytes, kD = 512, kM = 576;
  static constexpr int kOffsetShift = -1;
};
template <>
struct LegacyRecord<DType::Q5_0> {
  static constexpr size_t kBytes = kQ5_0RecordBytes, kD = 640, kHigh = 512;
  static constexpr int kOffsetShift = 1;
};
template <>
struct LegacyRecord<DType::Q8_0> {
  static constexpr size_t kBytes = kQ8_0RecordBytes, kD = 1024;
  static constexpr int kOffsetShift = 4;
};

// Bit p of each byte of v moved to bit 4 (Q5_0's fifth code bit).
template <int p>
HWY_INLINE VU8 BitTo4(VU8 v) {
  if constexpr (p <= 4)
    return ShiftLeftWords<4 - p>(v);
  else
    return ShiftRightWords<p - 4>(v);
}

template <int R, DType T>
HWY_NOINLINE void PanelLegacy(const uint8_t* panel, Records span, const TileActs<R>& x, PartAt at,
                              StreamLead prefetch, float* y, int64_t ldy) {
  using Rec = LegacyRecord<T>;
  const DU8 du8;
  const DI32 di32;
  const DF df;
  const VU8 low4 = hn::Set(du8, 0x0F), bit4 = hn::Set(du8, 0x10);
  // Short tiles: each block's products in two integer chains (PanelQ4K's kSplit).
  constexpr bool kSplit = R < 4;
  VF acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = span.Start(df, y + r * ldy);
  for (int64_t rec_index = span.begin; rec_index < span.end; ++rec_index) {
    const uint8_t* rec = panel + rec_index * Rec::kBytes;
    const RecordPrefetch<Rec::kBytes, 2> fetch(rec, prefetch);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      fetch.part(h);
      const int64_t b = 2 * rec_index + h;
      const int64_t chunk = (b / 8) * 256;
      const int in = 8 * static_cast<int>(b % 8);  // the block's bytes in its chunk
      VI32 sum[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        if constexpr (Rec::kOffsetShift < 0)
          sum[r] = hn::Zero(di32);
        else
          sum[r] = hn::ShiftLeft<Rec::kOffsetShift>(hn::Set(di32, x.q4_offset[r][b]));
      }
      if constexpr (T == DType::Q8_0) {  // one chain: two measured slower (decisions.md)
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          const VU8 w = hn::Load(du8, rec + 64 * (8 * h + i) + at.codes);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r)
            sum[r] = DotWide(sum[r], w, Step(x.q[r] + chunk, 64 * (i % 4) + in + 4 * (i / 4)));
        }
      } else {
        VU8 high = hn::Zero(du8);
        if constexpr (T == DType::Q5_0) high = hn::Load(du8, rec + Rec::kHigh + 64 * h + at.codes);
        auto codes = [&](int v, VU8& lo, VU8& hi) __attribute__((always_inline)) {
          const VU8 packed = hn::Load(du8, rec + 64 * (4 * h + v) + at.codes);
          lo = hn::And(packed, low4);
          hi = hn::And(ShiftRightWords<4>(packed), low4);
          if constexpr (T == DType::Q5_0) {  // (high bit moved to bit 4 & 0x10) | code
            VU8 hl, hh;
            switch (v) {
              case 0:
                hl = BitTo4<0>(high), hh = BitTo4<4>(high);
                break;
              case 1:
                hl = BitTo4<1>(high), hh = BitTo4<5>(high);
                break;
              case 2:
                hl = BitTo4<2>(high), hh = BitTo4<6>(high);
                break;
              default:
                hl = BitTo4<3>(high), hh = BitTo4<7>(high);
                break;
            }
            lo = hn::OrAnd(lo, hl, bit4);
            hi = hn::OrAnd(hi, hh, bit4);
          }
        };
        // Codes up to 15, or 31 with Q5_0's fifth bit.
        using Sum = GroupSum<WordTerms(T == DType::Q5_0 ? 31 : 15)>;
        Sum chain[R], upper[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) chain[r] = Sum(sum[r]);
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          VU8 lo, hi;
          codes(v, lo, hi);
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            if constexpr (kSplit) {
              chain[r].Add(v, lo, Step(x.q[r] + chunk, 64 * v + in));
              upper[r].Add(v, hi, Step(x.q[r] + chunk, 64 * v + in + 4));
            } else {
              chain[r].Add(2 * v, lo, Step(x.q[r] + chunk, 64 * v + in));
              chain[r].Add(2 * v + 1, hi, Step(x.q[r] + chunk, 64 * v + in + 4));
            }
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          sum[r] = kSplit ? hn::Add(chain[r].Sum(), upper[r].Sum()) : chain[r].Sum();
      }
      const VF d = HalvesToFloats(rec + Rec::kD + 32 * h + at.halves);
      VF m = hn::Zero(df);
      if constexpr (T == DType::Q4_1) m = HalvesToFloats(rec + Rec::kM + 32 * h + at.halves);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float da = x.gd[r][2 * b];
        acc[r] = hn::MulAdd(hn::ConvertTo(df, sum[r]), hn::Mul(d, hn::Set(df, da)), acc[r]);
        if constexpr (T == DType::Q4_1)
          acc[r] = hn::MulAdd(m, hn::Set(df, da * x.sum32[r][b]), acc[r]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) hn::StoreU(acc[r], df, y + r * ldy);
}

// With two parts (AVX2), a tile of one or two rows takes the panel span by span
// (about kSpanBytes of records), each span through both parts before the next:
// the second part reads the span from L1, and the first part of the next span
// keeps the stream from memory going, where whole panels part by part would
// leave it idle during each panel's second part. Longer tiles compute long
// enough per record to hide that, and run faster on whole panels
// (docs/decisions.md, "AVX2 in the packed layout"). Only the first part
// prefetches.
constexpr int64_t kSpanBytes = 4096;

template <int R>
HWY_INLINE void PanelPart(DType type, const uint8_t* panel, Records span, const TileActs<R>& acts,
                          PartAt at, StreamLead prefetch, float* y, int64_t ldy) {
  switch (type) {
    case DType::Q4_K:
      return PanelQ4K<R>(panel, span, acts, at, prefetch, y, ldy);
    case DType::Q6_K:
      return PanelQ6K<R>(panel, span, acts, at, prefetch, y, ldy);
    case DType::Q4_0:
      return PanelLegacy<R, DType::Q4_0>(panel, span, acts, at, prefetch, y, ldy);
    case DType::Q4_1:
      return PanelLegacy<R, DType::Q4_1>(panel, span, acts, at, prefetch, y, ldy);
    case DType::Q5_0:
      return PanelLegacy<R, DType::Q5_0>(panel, span, acts, at, prefetch, y, ldy);
    default:
      return PanelLegacy<R, DType::Q8_0>(panel, span, acts, at, prefetch, y, ldy);
  }
}

// One tile of R activation rows against a panel of `records` records; output
// columns of part p start at y + kLanes p.
template <int R>
HWY_INLINE void PanelTile(DType type, const uint8_t* panel, int64_t records, const QActs& x, int m0,
                          StreamLead prefetch, float* y, int64_t ldy) {
  const TileActs<R> acts(x, m0);
  const int64_t step =
      kParts == 1 || R > 2
          ? records
          : std::max<int64_t>(1, kSpanBytes / static_cast<int64_t>(packed_record_bytes(type)));
  for (int64_t begin = 0; begin < records; begin += step) {
    const Records span{begin, std::min(records, begin + step)};
    for (int p = 0; p < kParts; ++p) {
      const PartAt at(p);
      PanelPart<R>(type, panel, span, acts, at, p == 0 ? prefetch : StreamLead{}, y + at.bytes,
                   ldy);
    }
  }
}

// Tiles of 1..kMaxTile rows (a compile-time R each).
template <int R = kMaxTile>
HWY_INLINE void TileOf(int rows, DType type, const uint8_t* panel, int64_t records, const QActs& x,
                       int m0, StreamLead prefetch, float* y, int64_t ldy) {
  if constexpr (R > 1) {
    if (rows < R) return TileOf<R - 1>(rows, type, panel, records, x, m0, prefetch, y, ldy);
  }
  PanelTile<R>(type, panel, records, x, m0, prefetch, y, ldy);
}

// Panels of columns [n0, n1); every tile of activation rows takes a panel in turn
// while it is in L1/L2 (the first tile prefetches the stream ahead). Where one
// tile reads each panel once and whole (one tile, one part), the stream may be
// prefetched non-temporally (c.non_temporal); where later tiles or an AVX2
// panel's second part read it again, it goes to L2.
void PackedChunk(const MatmulChunk& c) {
  const int64_t nsb = c.K / packed_record_elements(c.type);  // records per panel
  const bool once = kParts == 1 && c.m1 - c.m0 <= kMaxTile;
  const StreamLead lead{c.prefetch_bytes, c.non_temporal && once};
  // The stream's first `lead.bytes` up front; then each record fetches the
  // bytes that far ahead of it.
  const uint8_t* first = packed_panel(c.packed, c.type, c.K, c.n0 / kPanelRows);
  for (int64_t off = 0; off < lead.bytes; off += 64) PrefetchStream(first + off, lead.non_temporal);
  for (int64_t n = c.n0; n < c.n1; n += kPanelRows) {
    const uint8_t* panel = packed_panel(c.packed, c.type, c.K, n / kPanelRows);
    for (int m = c.m0; m < c.m1; m += kMaxTile) {
      const int rows = std::min(kMaxTile, c.m1 - m);
      const StreamLead ahead = m == c.m0 ? lead : StreamLead{};
      TileOf(rows, c.type, panel, nsb, *c.acts, m, ahead, c.y + m * c.ldy + n, c.ldy);
    }
  }
}

bool PackedAvailable() { return true; }
#else
void PackedChunk(const MatmulChunk&) {}  // never called: PackedAvailable() is false
bool PackedAvailable() { return false; }
#endif  // HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/target_kernels.h"

namespace tandem::kernels::cpu {
HWY_EXPORT(PackedChunk);
HWY_EXPORT(PackedAvailable);
void resolve_matmul_packed(size_t index, TargetKernels& k) {
  const bool available = dispatch_entry(HWY_DISPATCH_TABLE(PackedAvailable), index)();
  k.matmul_packed = available ? dispatch_entry(HWY_DISPATCH_TABLE(PackedChunk), index) : nullptr;
}
}  // namespace tandem::kernels::cpu
#endif
