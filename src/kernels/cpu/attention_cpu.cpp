// Fused causal attention over the KV cache with an online softmax.
//
// Work is split by (KV head, tile of up to kTile query rows). A job walks the
// cache in blocks of kKeyBlock positions (prefetching the next block's rows),
// widens each block's K and V rows of its KV head to F32 once (K transposed, so
// that a block's scores are computed along the lanes, kPairs (row, head) pairs
// at a time) and applies them to every query head of the group and every row of
// the tile (GQA: each KV head is read once per tile). Key blocks start at
// multiples of kKeyBlock in absolute (logical) position and every row stops at
// its own position, so a row's arithmetic is the same whichever rows share the
// call (batch invariance), and whether its keys are read through a remap (a
// drafted tree's node reading its ancestors) or from consecutive rows.
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention_cpu.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <hwy/cache_control.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/aligned.h"
#include "kernels/cpu/attention_job.h"
#include "kernels/cpu/worker_scratch.h"
#include "quant/quants.h"

#if HWY_ARCH_X86
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using Job = AttentionJob;

constexpr int kTile = kAttentionTile;

// Bytes per cached value: the cache is F32 or F16 (attention() checks).
HWY_INLINE size_t ValueBytes(const KVSeqView& kv) { return kv.type == DType::F32 ? 4 : 2; }

// Where the K and V values of KV head g sit in the cache for the positions of
// one key block: located once per block (walking the cache's blocks, no
// division per row) and used to prefetch the block, then to load it.
struct KeyBlockRows {
  int n = 0;  // positions located
  const uint8_t* k[kKeyBlock];
  const uint8_t* v[kKeyBlock];
};

// Positions [p0, p1) (at most kKeyBlock; none if p1 <= p0), logical: those
// from kv.remap_from on are located at their remapped physical rows. Only the
// addresses change, so a block's arithmetic is the same with a remap.
HWY_INLINE void LocateRows(const KVSeqView& kv, int p0, int p1, int row_elems, int g, int hd,
                           KeyBlockRows& rows) {
  rows.n = std::max(0, p1 - p0);
  if (rows.n == 0) return;
  const size_t elem = ValueBytes(kv), head = size_t(g) * hd * elem, row = size_t(row_elems) * elem;
  const int direct = kv.remap ? std::clamp(kv.remap_from - p0, 0, rows.n) : rows.n;
  int block = p0 / kv.block_size, in_block = p0 % kv.block_size;
  for (int j = 0; j < direct; ++j) {
    const size_t at = in_block * row + head;
    rows.k[j] = static_cast<const uint8_t*>(kv.k_blocks[block]) + at;
    rows.v[j] = static_cast<const uint8_t*>(kv.v_blocks[block]) + at;
    if (++in_block == kv.block_size) in_block = 0, ++block;
  }
  for (int j = direct; j < rows.n; ++j) {
    const int p = kv.remap[p0 + j - kv.remap_from];
    const size_t at = size_t(p % kv.block_size) * row + head;
    rows.k[j] = static_cast<const uint8_t*>(kv.k_blocks[p / kv.block_size]) + at;
    rows.v[j] = static_cast<const uint8_t*>(kv.v_blocks[p / kv.block_size]) + at;
  }
}

// A block's K and V rows, prefetched while the block before them is computed:
// a long context's cache comes from memory.
HWY_INLINE void PrefetchRows(const KeyBlockRows& rows, size_t row_bytes) {
  for (int j = 0; j < rows.n; ++j)
    for (size_t b = 0; b < row_bytes; b += 64) {
      hwy::Prefetch(rows.k[j] + b);
      hwy::Prefetch(rows.v[j] + b);
    }
}

// The head_dim values of one cache row of a KV head (at: its first), as floats.
HWY_INLINE void LoadHead(const uint8_t* at, const KVSeqView& kv, int hd, float* out) {
  if (kv.type == DType::F32) {
    std::memcpy(out, at, hd * sizeof(float));
    return;
  }
  const uint16_t* src = reinterpret_cast<const uint16_t*>(at);
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const int L = static_cast<int>(hn::Lanes(df));
  int d = 0;
  for (; d + L <= hd; d += L)
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(src + d))),
               df, out + d);
  for (; d < hd; ++d) out[d] = f16_to_f32(src[d]);
}

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// ---------------------------------------------------------------------------
// Raw x86 intrinsics of Transpose16, each for an instruction that Highway 1.0.3
// cannot express.

// vshuff32x4 taking 128-bit blocks 0, 2 of a then 0, 2 of b (even blocks), or
// 1, 3 of each (odd blocks): Highway 1.0.3 has no such block shuffle (its
// ConcatEven/ConcatOdd work on lanes).
HWY_INLINE VF EvenBlocks(VF a, VF b) { return VF{_mm512_shuffle_f32x4(a.raw, b.raw, 0x88)}; }
HWY_INLINE VF OddBlocks(VF a, VF b) { return VF{_mm512_shuffle_f32x4(a.raw, b.raw, 0xDD)}; }

// ---------------------------------------------------------------------------
// 16 values of a cache row, as floats.
template <bool kF16>
HWY_INLINE VF Load16(const uint8_t* at) {
  const DF df;
  if constexpr (kF16)
    return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(),
                                       reinterpret_cast<const hwy::float16_t*>(at)));
  return hn::LoadU(df, reinterpret_cast<const float*>(at));
}

// 16 values of each of 16 rows (at[j]: row j's first), transposed in registers
// into dst[i * ld + j] = value i of row j: unpacks within pairs of rows, then
// within groups of four, then 128-bit lane shuffles across the groups. The
// cache type is a template argument and every loop is unrolled, so that the 16
// rows stay in registers: with the type tested per row, GCC kept the loads a
// loop that stored them to the stack and read them back, and a one-row decode's
// attention took 17-26% longer (docs/decisions.md, "Key rows transposed in
// registers").
template <bool kF16>
HWY_INLINE void Transpose16(const uint8_t* const* at, float* dst, size_t ld) {
  const DF df;
  const hn::Repartition<double, DF> dd;
  VF r[16], a[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = Load16<kF16>(at[i]);
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    a[i] = hn::InterleaveLower(r[i], r[i + 1]);
    a[i + 1] = hn::InterleaveUpper(df, r[i], r[i + 1]);
  }
  // Group G (rows 4G..4G+3): r[4G + c] gets columns c, c+4, c+8, c+12 of those
  // rows, one column per 128-bit lane.
#pragma GCC unroll 4
  for (int g = 0; g < 16; g += 4) {
    const auto a0 = hn::BitCast(dd, a[g]), a1 = hn::BitCast(dd, a[g + 1]);
    const auto a2 = hn::BitCast(dd, a[g + 2]), a3 = hn::BitCast(dd, a[g + 3]);
    r[g] = hn::BitCast(df, hn::InterleaveLower(a0, a2));
    r[g + 1] = hn::BitCast(df, hn::InterleaveUpper(dd, a0, a2));
    r[g + 2] = hn::BitCast(df, hn::InterleaveLower(a1, a3));
    r[g + 3] = hn::BitCast(df, hn::InterleaveUpper(dd, a1, a3));
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const VF e0 = EvenBlocks(r[c], r[4 + c]);  // G0, G1: c and c+8
    const VF e1 = OddBlocks(r[c], r[4 + c]);   // G0, G1: c+4 and c+12
    const VF e2 = EvenBlocks(r[8 + c], r[12 + c]);
    const VF e3 = OddBlocks(r[8 + c], r[12 + c]);
    hn::StoreU(EvenBlocks(e0, e2), df, dst + c * ld);
    hn::StoreU(OddBlocks(e0, e2), df, dst + (c + 8) * ld);
    hn::StoreU(EvenBlocks(e1, e3), df, dst + (c + 4) * ld);
    hn::StoreU(OddBlocks(e1, e3), df, dst + (c + 12) * ld);
  }
}
#endif

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// LoadKeysTransposed for heads of a multiple of 16 values, 16 x 16 at a time,
// the cache type (F16 or F32) chosen once per block.
template <bool kF16>
HWY_INLINE void TransposeKeys(const KeyBlockRows& rows, int hd, float* kt) {
  static_assert(kKeyBlock % 16 == 0);
  alignas(64) static constexpr float kZeros[16] = {};  // the rows past n, F32 or F16
  constexpr size_t kElem = kF16 ? 2 : 4;
  for (int j0 = 0; j0 < kKeyBlock; j0 += 16)
    for (int d0 = 0; d0 < hd; d0 += 16) {
      const uint8_t* at[16];
      for (int j = 0; j < 16; ++j)
        at[j] = j0 + j < rows.n ? rows.k[j0 + j] + d0 * kElem
                                : reinterpret_cast<const uint8_t*>(kZeros);
      Transpose16<kF16>(at, kt + size_t(d0) * kKeyBlock + j0, kKeyBlock);
    }
}
#endif

// A block's keys (rows.k), widened and transposed into kt[d * kKeyBlock + j] =
// k_j[d] so that the keys run along the lanes; the slots past rows.n get zeros.
// One value at a time, this was most of a one-row decode's attention.
HWY_INLINE void LoadKeysTransposed(const KeyBlockRows& rows, const KVSeqView& kv, int hd,
                                   float* krow, float* kt) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (hd % 16 == 0)
    return kv.type == DType::F16 ? TransposeKeys<true>(rows, hd, kt)
                                 : TransposeKeys<false>(rows, hd, kt);
#endif
  for (int j = 0; j < kKeyBlock; ++j) {
    if (j < rows.n)
      LoadHead(rows.k[j], kv, hd, krow);
    else
      std::fill(krow, krow + hd, 0.0f);
    for (int d = 0; d < hd; ++d) kt[size_t(d) * kKeyBlock + j] = krow[d];
  }
}

// Online-softmax state of one (row, head): running max and denominator.
struct RowState {
  float max = -INFINITY, denom = 0.0f;
};

// One (row, head) pair within a key block: its query, the block's keys it sees,
// its online-softmax state and its output.
struct Pair {
  const float* q;
  int n;
  RowState* st;
  float* o;
};

// Scores of NP (row, head) pairs against the block's keys: out[p][j] = scale *
// sum over d of q_p[d] k_j[d], with K transposed (kt[d * kKeyBlock + j]) so that
// the keys run along the lanes. Each pair's sum runs over d in order in its own
// chains, so a pair's scores do not depend on the pairs beside it.
template <int NP>
HWY_INLINE void ScorePairs(const Pair* pairs, const float* kt, int hd, float scale,
                           float (*out)[kKeyBlock]) {
  const DF df;
  const float* q[NP];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p) q[p] = pairs[p].q;
  constexpr int L = HWY_MIN(static_cast<int>(HWY_LANES(float)), kKeyBlock);
  constexpr int kVecs = kKeyBlock / L;
  VF acc[NP][kVecs];
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) acc[p][v] = hn::Zero(df);
  for (int d = 0; d < hd; ++d) {
    VF k[kVecs];
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) k[v] = hn::LoadU(df, kt + size_t(d) * kKeyBlock + v * L);
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
      const VF qd = hn::Set(df, q[p][d]);
#pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) acc[p][v] = hn::MulAdd(qd, k[v], acc[p][v]);
    }
  }
  const VF vs = hn::Set(df, scale);
#pragma GCC unroll 8
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) hn::StoreU(hn::Mul(acc[p][v], vs), df, out[p] + v * L);
}

// ScorePairs for the first `count` (1..NP) pairs.
template <int NP>
HWY_INLINE void ScoreFirstPairs(int count, const Pair* pairs, const float* kt, int hd, float scale,
                                float (*out)[kKeyBlock]) {
  if constexpr (NP > 1)
    if (count < NP) return ScoreFirstPairs<NP - 1>(count, pairs, kt, hd, scale, out);
  ScorePairs<NP>(pairs, kt, hd, scale, out);
}

// For NP pairs that see the same n keys, NV vectors of their heads from value d
// on: o = o * c + p[0] v[0] + p[1] v[1] + ... + p[n-1] v[n-1] (p: the pair's
// weights sc[k]), the terms added in that order whatever NP and NV, so a lane's
// bits do not depend on them. The NP * NV accumulators stay in registers over
// all n value rows, each row's vectors loaded once for all NP pairs.
template <int NP, int NV>
HWY_INLINE void AccumulatePairsChunk(const Pair* pairs, const float* c, float (*sc)[kKeyBlock],
                                     const float* v, int n, int hd, int d) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  VF acc[NP][NV];
#pragma GCC unroll 8
  for (int k = 0; k < NP; ++k) {
    const VF ck = hn::Set(df, c[k]);
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) acc[k][i] = hn::Mul(hn::LoadU(df, pairs[k].o + d + i * L), ck);
  }
  for (int j = 0; j < n; ++j) {
    VF vj[NV];
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) vj[i] = hn::LoadU(df, v + size_t(j) * hd + d + i * L);
#pragma GCC unroll 8
    for (int k = 0; k < NP; ++k) {
      const VF pj = hn::Set(df, sc[k][j]);
#pragma GCC unroll 8
      for (int i = 0; i < NV; ++i) acc[k][i] = hn::MulAdd(vj[i], pj, acc[k][i]);
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < NP; ++k)
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i) hn::StoreU(acc[k][i], df, pairs[k].o + d + i * L);
}

// AccumulatePairsChunk for the first `count` (1..NP) pairs.
template <int NP, int NV>
HWY_INLINE void AccumulateFirstPairs(int count, const Pair* pairs, const float* c,
                                     float (*sc)[kKeyBlock], const float* v, int n, int hd, int d) {
  if constexpr (NP > 1)
    if (count < NP) return AccumulateFirstPairs<NP - 1, NV>(count, pairs, c, sc, v, n, hd, d);
  AccumulatePairsChunk<NP, NV>(pairs, c, sc, v, n, hd, d);
}

// One pair's output (pair->o, its weights sc[0]), the widest chunks first: each
// vector's chain is n dependent FMAs, so a head of 64 values taken one vector
// at a time waited on four chains in turn (docs/decisions.md, "Attention for
// heads of 64").
HWY_INLINE void AccumulateValues(const Pair* pair, const float* c, float (*sc)[kKeyBlock],
                                 const float* v, int hd) {
  const int L = static_cast<int>(hn::Lanes(DF()));
  const int n = pair->n;
  int d = 0;
  for (; d + 8 * L <= hd; d += 8 * L) AccumulatePairsChunk<1, 8>(pair, c, sc, v, n, hd, d);
  if (d + 4 * L <= hd) AccumulatePairsChunk<1, 4>(pair, c, sc, v, n, hd, d), d += 4 * L;
  if (d + 2 * L <= hd) AccumulatePairsChunk<1, 2>(pair, c, sc, v, n, hd, d), d += 2 * L;
  for (; d + L <= hd; d += L) AccumulatePairsChunk<1, 1>(pair, c, sc, v, n, hd, d);
  for (; d < hd; ++d) {
    float acc = pair->o[d] * c[0];
    for (int j = 0; j < n; ++j) acc = std::fma(v[size_t(j) * hd + d], sc[0][j], acc);
    pair->o[d] = acc;
  }
}

// (row, head) pairs scored together: 12 independent FMA chains with 16 lanes
// (two per pair) and 32 registers, 8 with 8 lanes.
constexpr int kPairs = HWY_LANES(float) >= 16 ? 6 : 4;

// Every pair's output rescaled by c[k] and the block's value rows added. With
// 16 lanes, the pairs of a block (at most kPairs) that see the same keys (all
// of a decode row's heads) take the value rows together where heads are a
// multiple of 64 values: four vectors of every pair at a time, 24 of the 32
// registers. Elsewhere each pair on its own (AccumulateValues).
HWY_INLINE void AccumulateBlockValues(const Pair* pairs, int count, const float* c,
                                      float (*sc)[kKeyBlock], const float* v, int hd) {
  const int L = static_cast<int>(hn::Lanes(DF()));
  bool same_keys = HWY_LANES(float) >= 16;
  for (int k = 1; k < count && same_keys; ++k) same_keys = pairs[k].n == pairs[0].n;
  if (same_keys && hd % (4 * L) == 0) {
    for (int d = 0; d < hd; d += 4 * L)
      AccumulateFirstPairs<kPairs, 4>(count, pairs, c, sc, v, pairs[0].n, hd, d);
    return;
  }
  for (int k = 0; k < count; ++k) AccumulateValues(pairs + k, c + k, sc + k, v, hd);
}

// One key block for `count` pairs: pair k's first n scores sc[k] (the rest
// masked) turned into weights in place, its running max and denominator
// updated, its output rescaled and the block's value rows added. Each stage
// runs over all the pairs before the next, so that their independent chains
// (reductions, exp) overlap; max and sum are taken as vectors over the block.
// A block that does not raise a pair's max rescales by exactly 1 without
// calling exp.
HWY_INLINE void OnlineSoftmaxBlock(float (*sc)[kKeyBlock], const Pair* pairs, int count,
                                   const float* v, int hd) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  auto valid = [&](int j, int nk) {  // the keys of the vector at j that the pair sees
    return hn::Lt(hn::Iota(df, static_cast<float>(j)), hn::Set(df, float(nk)));
  };
  float new_max[kPairs];
  for (int k = 0; k < count; ++k) {
    auto vmax = hn::Set(df, -INFINITY);
    for (int j = 0; j < kKeyBlock; j += L)
      vmax = hn::Max(vmax, hn::IfThenElse(valid(j, pairs[k].n), hn::LoadU(df, sc[k] + j),
                                          hn::Set(df, -INFINITY)));
    new_max[k] = std::max(pairs[k].st->max, hn::GetLane(hn::MaxOfLanes(df, vmax)));
  }
  float c[kPairs];
  for (int k = 0; k < count; ++k) {
    // exp(-inf) = 0: the first block rescales nothing.
    RowState& st = *pairs[k].st;
    const float old_max = st.max;
    c[k] = old_max == -INFINITY    ? 0.0f
           : old_max == new_max[k] ? 1.0f
                                   : std::exp(old_max - new_max[k]);
    const auto vmax = hn::Set(df, new_max[k]);
    auto vsum = hn::Zero(df);
    for (int j = 0; j < kKeyBlock; j += L) {
      const auto e = hn::IfThenElseZero(valid(j, pairs[k].n),
                                        hn::Exp(df, hn::Sub(hn::LoadU(df, sc[k] + j), vmax)));
      hn::StoreU(e, df, sc[k] + j);
      vsum = hn::Add(vsum, e);
    }
    st.denom = st.denom * c[k] + hn::GetLane(hn::SumOfLanes(df, vsum));
    st.max = new_max[k];
  }
  AccumulateBlockValues(pairs, count, c, sc, v, hd);
}

void AttendTile(const Job& job, int g, int r0, int r1, WorkerScratch& scratch) {
  const AttentionShape& sh = *job.shape;
  const int hd = sh.head_dim, group = sh.n_heads / sh.n_kv_heads;
  const int row_elems = sh.n_kv_heads * hd;
  const size_t q_stride = static_cast<size_t>(sh.n_heads) * hd;
  // Cache-line aligned: with malloc's 16-byte alignment most vector loads of
  // these rows straddled two lines.
  AlignedVector<float>& krow = scratch.key_row;
  AlignedVector<float>& ktbuf = scratch.keys_t;
  AlignedVector<float>& vbuf = scratch.values;
  AlignedVector<float>& obuf = scratch.outputs;
  krow.resize(hd);
  ktbuf.resize(size_t(kKeyBlock) * hd);
  vbuf.resize(size_t(kKeyBlock) * hd);
  const int n_pairs = (r1 - r0) * group;
  obuf.assign(size_t(n_pairs) * hd, 0.0f);
  RowState state[kTile * 64];  // group <= 64 is checked by Kernels::create
  for (int i = 0; i < n_pairs; ++i) state[i] = RowState{};

  int last = 0;
  for (int i = r0; i < r1; ++i) last = std::max(last, job.pos[i]);
  alignas(64) float scores[kPairs][kKeyBlock];
  const KVSeqView& kv = *job.kv;
  KeyBlockRows rows[2];  // this block's, the next block's
  LocateRows(kv, 0, std::min(kKeyBlock, last + 1), row_elems, g, hd, rows[0]);
  for (int p0 = 0, b = 0; p0 <= last; p0 += kKeyBlock, b ^= 1) {
    const int p1 = std::min(p0 + kKeyBlock, last + 1);
    const KeyBlockRows& cur = rows[b];
    LocateRows(kv, p1, std::min(p0 + 2 * kKeyBlock, last + 1), row_elems, g, hd, rows[b ^ 1]);
    PrefetchRows(rows[b ^ 1], size_t(hd) * ValueBytes(kv));
    LoadKeysTransposed(cur, kv, hd, krow.data(), ktbuf.data());
    for (int j = 0; j < cur.n; ++j) LoadHead(cur.v[j], kv, hd, &vbuf[size_t(j) * hd]);
    // Pairs (row i, head hh) in order, in groups of at most kPairs as even as
    // they go (7 as 4 + 3, not 6 + 1: a group of one is two FMA chains, which
    // wait on their latency); rows that end before this block are skipped. A
    // pair's scores do not depend on its group (ScorePairs).
    int active = 0;
    for (int i = r0; i < r1; ++i) active += job.pos[i] >= p0 ? group : 0;
    const int batches = (active + kPairs - 1) / kPairs;
    const int per_batch = batches > 0 ? (active + batches - 1) / batches : kPairs;
    Pair pairs[kPairs];
    int count = 0;
    auto flush = [&]() {
      ScoreFirstPairs<kPairs>(count, pairs, ktbuf.data(), hd, sh.scale, scores);
      OnlineSoftmaxBlock(scores, pairs, count, vbuf.data(), hd);
      count = 0;
    };
    for (int pid = 0; pid < n_pairs; ++pid) {
      const int i = r0 + pid / group, h = g * group + pid % group;
      if (job.pos[i] < p0) continue;
      pairs[count++] = Pair{job.q + i * q_stride + size_t(h) * hd,
                            std::min(p1, job.pos[i] + 1) - p0,  // keys of this block row i sees
                            &state[pid], &obuf[size_t(pid) * hd]};
      if (count == per_batch) flush();
    }
    if (count > 0) flush();
  }
  for (int i = r0; i < r1; ++i)
    for (int hh = 0; hh < group; ++hh) {
      const int h = g * group + hh;
      const float inv = 1.0f / state[(i - r0) * group + hh].denom;
      const float* o = &obuf[(size_t(i - r0) * group + hh) * hd];
      float* dst = job.out + i * q_stride + size_t(h) * hd;
      for (int d = 0; d < hd; ++d) dst[d] = o[d] * inv;
    }
}

void AttendJobs(const Job& job, int64_t j0, int64_t j1, WorkerScratch& scratch) {
  const int tiles = (job.n_q + kTile - 1) / kTile;
  for (int64_t j = j0; j < j1; ++j) {
    const int g = static_cast<int>(j / tiles), t = static_cast<int>(j % tiles);
    AttendTile(job, g, t * kTile, std::min(job.n_q, (t + 1) * kTile), scratch);
  }
}

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "kernels/cpu/cpu_kernels.h"

namespace tandem::kernels::cpu {
HWY_EXPORT(AttendJobs);

void resolve_attention(size_t index, TargetKernels& k) {
  k.attend = dispatch_entry(HWY_DISPATCH_TABLE(AttendJobs), index);
}

// Jobs are (KV head, tile of query rows) pairs: every call's, numbered call
// after call, split among the threads in one region; each computes what it
// computes alone.
void CpuKernels::attend_batch(const AttentionCall* calls, int n_calls,
                              const AttentionShape& shape) {
  batch_jobs_.clear();
  batch_first_.clear();
  int64_t total = 0;
  for (int i = 0; i < n_calls; ++i) {
    const AttentionCall& c = calls[i];
    batch_jobs_.push_back({c.q, c.pos, &c.kv, &shape, c.out, c.n_q});
    batch_first_.push_back(total);
    total += int64_t{shape.n_kv_heads} * ((c.n_q + kAttentionTile - 1) / kAttentionTile);
  }
  batch_first_.push_back(total);
  struct Call {  // one reference for the pool's job, so that std::function does not allocate
    const std::vector<AttentionJob>& jobs;
    const std::vector<int64_t>& first;
    void (*attend)(const AttentionJob&, int64_t, int64_t, WorkerScratch&);
    std::vector<WorkerScratch>& workers;
  } call{batch_jobs_, batch_first_, fn_.attend, workers_};
  pool().parallel_for(total, [&call](int64_t b, int64_t e, int thread) {
    // The call holding pair b, then each call the range reaches into.
    size_t j = static_cast<size_t>(std::upper_bound(call.first.begin(), call.first.end(), b) -
                                   call.first.begin() - 1);
    for (; j < call.jobs.size() && call.first[j] < e; ++j) {
      const int64_t begin = call.first[j], end = call.first[j + 1];
      call.attend(call.jobs[j], std::max(b, begin) - begin, std::min(e, end) - begin,
                  call.workers[thread]);
    }
  });
}
}  // namespace tandem::kernels::cpu
#endif
