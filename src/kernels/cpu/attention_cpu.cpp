// Fused causal attention over the KV cache with an online softmax.
//
// Work is split by (KV head, tile of up to kTile query rows). A job walks the
// cache in blocks of kKeyBlock positions, widens each block's K and V rows of its
// KV head to F32 once (K transposed, so that a block's scores are computed along
// the lanes, four (row, head) pairs at a time) and applies them to every query
// head of the group and every row of the tile (GQA: each KV head is read once
// per tile). Key blocks
// start at multiples of kKeyBlock in absolute position and every row stops at
// its own position, so a row's arithmetic is the same whichever rows share the
// call (batch invariance).
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention_cpu.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/quants.h"

#ifndef TANDEM_KERNELS_CPU_ATTENTION_JOB_
#define TANDEM_KERNELS_CPU_ATTENTION_JOB_
namespace tandem::kernels::cpu {
constexpr int kAttentionTile = 16;  // query rows per job
struct AttentionJob {
  const float* q;
  const int* pos;
  const KVSeqView* kv;
  const AttentionShape* shape;
  float* out;
  int n_q;
};
}  // namespace tandem::kernels::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace tandem::kernels::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using Job = AttentionJob;

constexpr int kKeyBlock = 32;
constexpr int kTile = kAttentionTile;

// Row p of the cache (K or V), the head_dim values of KV head g, as floats.
HWY_INLINE void LoadHead(const void* const* blocks, const KVSeqView& kv, int p, int row_elems,
                         int g, int hd, float* out) {
  const auto* block = static_cast<const uint8_t*>(blocks[p / kv.block_size]);
  const size_t row = static_cast<size_t>(p % kv.block_size) * row_elems + size_t(g) * hd;
  if (kv.type == DType::F32) {
    std::memcpy(out, reinterpret_cast<const float*>(block) + row, hd * sizeof(float));
    return;
  }
  const uint16_t* src = reinterpret_cast<const uint16_t*>(block) + row;
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

// Scores of NP (row, head) pairs against the block's keys: out[p][j] = scale *
// sum over d of q_p[d] k_j[d], with K transposed (kt[d * kKeyBlock + j]) so that
// the keys run along the lanes. Each pair's sum runs over d in order in its own
// chains, so a pair's scores do not depend on the pairs beside it.
template <int NP>
HWY_INLINE void ScorePairs(const float* const* q, const float* kt, int hd, float scale,
                           float (*out)[kKeyBlock]) {
  const DF df;
  constexpr int L = HWY_MIN(static_cast<int>(HWY_LANES(float)), kKeyBlock);
  constexpr int kVecs = kKeyBlock / L;
  VF acc[NP][kVecs];
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) acc[p][v] = hn::Zero(df);
  for (int d = 0; d < hd; ++d) {
    VF k[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) k[v] = hn::LoadU(df, kt + size_t(d) * kKeyBlock + v * L);
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const VF qd = hn::Set(df, q[p][d]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[p][v] = hn::MulAdd(qd, k[v], acc[p][v]);
    }
  }
  const VF vs = hn::Set(df, scale);
#pragma GCC unroll 4
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) hn::StoreU(hn::Mul(acc[p][v], vs), df, out[p] + v * L);
}

// o = o * c + p[0] v[0] + p[1] v[1] + ... + p[n-1] v[n-1] over hd values, the
// terms added in that order; up to 8 vectors of o stay in registers over all n
// value rows instead of being loaded and stored once per row.
template <int NV>
HWY_INLINE void AccumulateChunk(float* o, const VF vc, const float* p, const float* v, int n,
                                int hd) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  VF acc[NV];
#pragma GCC unroll 8
  for (int i = 0; i < NV; ++i) acc[i] = hn::Mul(hn::LoadU(df, o + i * L), vc);
  for (int j = 0; j < n; ++j) {
    const VF pj = hn::Set(df, p[j]);
#pragma GCC unroll 8
    for (int i = 0; i < NV; ++i)
      acc[i] = hn::MulAdd(hn::LoadU(df, v + size_t(j) * hd + i * L), pj, acc[i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < NV; ++i) hn::StoreU(acc[i], df, o + i * L);
}

HWY_INLINE void AccumulateValues(float* o, float c, const float* p, const float* v, int n,
                                 int hd) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  const VF vc = hn::Set(df, c);
  int d = 0;
  for (; d + 8 * L <= hd; d += 8 * L) AccumulateChunk<8>(o + d, vc, p, v + d, n, hd);
  for (; d + L <= hd; d += L) AccumulateChunk<1>(o + d, vc, p, v + d, n, hd);
  for (; d < hd; ++d) {
    float acc = o[d] * c;
    for (int j = 0; j < n; ++j) acc = std::fma(v[size_t(j) * hd + d], p[j], acc);
    o[d] = acc;
  }
}

// Online-softmax state of one (row, head): running max, denominator, output.
struct RowState {
  float max = -INFINITY, denom = 0.0f;
};

constexpr int kPairs = 4;  // (row, head) pairs scored together: 8 independent FMA chains

// One key block for one (row, head): the first n of its kKeyBlock scores sc
// (the rest masked) turned into weights in place, the running max and
// denominator updated, o rescaled and the block's value rows added. Max and sum
// are taken as vectors over the whole block (scalar loops were serial chains of
// 32 steps per pair and block).
HWY_INLINE void OnlineSoftmaxStep(float* sc, int n, const float* v, int hd, RowState& st,
                                  float* o) {
  const DF df;
  const int L = static_cast<int>(hn::Lanes(df));
  auto valid = [&](int j) {  // the keys of the vector at j that row sees
    return hn::Lt(hn::Iota(df, static_cast<float>(j)), hn::Set(df, float(n)));
  };
  auto vmax = hn::Set(df, -INFINITY);
  for (int j = 0; j < kKeyBlock; j += L)
    vmax = hn::Max(vmax, hn::IfThenElse(valid(j), hn::LoadU(df, sc + j), hn::Set(df, -INFINITY)));
  const float new_max = std::max(st.max, hn::GetLane(hn::MaxOfLanes(df, vmax)));
  // exp(-inf) = 0: the first block rescales nothing.
  const float correction = st.max == -INFINITY ? 0.0f : std::exp(st.max - new_max);
  vmax = hn::Set(df, new_max);
  auto vsum = hn::Zero(df);
  for (int j = 0; j < kKeyBlock; j += L) {
    const auto e = hn::IfThenElseZero(valid(j), hn::Exp(df, hn::Sub(hn::LoadU(df, sc + j), vmax)));
    hn::StoreU(e, df, sc + j);
    vsum = hn::Add(vsum, e);
  }
  st.denom = st.denom * correction + hn::GetLane(hn::SumOfLanes(df, vsum));
  st.max = new_max;
  AccumulateValues(o, correction, sc, v, n, hd);
}

void AttendTile(const Job& job, int g, int r0, int r1) {
  const AttentionShape& sh = *job.shape;
  const int hd = sh.head_dim, group = sh.n_heads / sh.n_kv_heads;
  const int row_elems = sh.n_kv_heads * hd;
  const size_t q_stride = static_cast<size_t>(sh.n_heads) * hd;
  static thread_local std::vector<float> krow, ktbuf, vbuf, obuf;
  krow.resize(hd);
  ktbuf.resize(size_t(kKeyBlock) * hd);  // keys past a block's end hold earlier (finite) keys
  vbuf.resize(size_t(kKeyBlock) * hd);
  const int n_pairs = (r1 - r0) * group;
  obuf.assign(size_t(n_pairs) * hd, 0.0f);
  RowState state[kTile * 64];  // group <= 64 is checked by the caller
  for (int i = 0; i < n_pairs; ++i) state[i] = RowState{};

  int last = 0;
  for (int i = r0; i < r1; ++i) last = std::max(last, job.pos[i]);
  alignas(64) float scores[kPairs][kKeyBlock];
  for (int p0 = 0; p0 <= last; p0 += kKeyBlock) {
    const int p1 = std::min(p0 + kKeyBlock, last + 1);
    for (int p = p0; p < p1; ++p) {
      LoadHead(job.kv->k_blocks, *job.kv, p, row_elems, g, hd, krow.data());
      for (int d = 0; d < hd; ++d) ktbuf[size_t(d) * kKeyBlock + (p - p0)] = krow[d];
      LoadHead(job.kv->v_blocks, *job.kv, p, row_elems, g, hd, &vbuf[size_t(p - p0) * hd]);
    }
    // Pairs (row i, head hh) in order, kPairs at a time; rows that end before
    // this block are skipped.
    int pair_id[kPairs], count = 0;
    auto flush = [&]() {
      const float* q[kPairs];
      for (int k = 0; k < count; ++k) {
        const int i = r0 + pair_id[k] / group, h = g * group + pair_id[k] % group;
        q[k] = job.q + i * q_stride + size_t(h) * hd;
      }
      switch (count) {
        case 4: ScorePairs<4>(q, ktbuf.data(), hd, sh.scale, scores); break;
        case 3: ScorePairs<3>(q, ktbuf.data(), hd, sh.scale, scores); break;
        case 2: ScorePairs<2>(q, ktbuf.data(), hd, sh.scale, scores); break;
        default: ScorePairs<1>(q, ktbuf.data(), hd, sh.scale, scores); break;
      }
      for (int k = 0; k < count; ++k) {
        const int i = r0 + pair_id[k] / group;
        const int n = std::min(p1, job.pos[i] + 1) - p0;  // keys of this block row i sees
        OnlineSoftmaxStep(scores[k], n, vbuf.data(), hd, state[pair_id[k]],
                          &obuf[size_t(pair_id[k]) * hd]);
      }
      count = 0;
    };
    for (int pid = 0; pid < n_pairs; ++pid) {
      if (job.pos[r0 + pid / group] < p0) continue;
      pair_id[count++] = pid;
      if (count == kPairs) flush();
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

void AttendJobs(const Job& job, int64_t j0, int64_t j1) {
  const int tiles = (job.n_q + kTile - 1) / kTile;
  for (int64_t j = j0; j < j1; ++j) {
    const int g = static_cast<int>(j / tiles), t = static_cast<int>(j % tiles);
    AttendTile(job, g, t * kTile, std::min(job.n_q, (t + 1) * kTile));
  }
}

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "core/error.h"

namespace tandem::kernels::cpu {
HWY_EXPORT(AttendJobs);

void attention(const float* q, int n_q, const int* pos, const KVSeqView& kv,
               const AttentionShape& shape, float* out, ThreadPool& pool) {
  if (n_q <= 0) return;
  check(shape.n_kv_heads > 0 && shape.n_heads % shape.n_kv_heads == 0 &&
            shape.n_heads / shape.n_kv_heads <= 64,
        "attention: {} query heads cannot be grouped over {} KV heads (at most 64 per group)",
        shape.n_heads, shape.n_kv_heads);
  check(kv.type == DType::F32 || kv.type == DType::F16, "attention: KV cache type {} unsupported",
        dtype_name(kv.type));
  const AttentionJob job{q, pos, &kv, &shape, out, n_q};
  const int64_t tiles = (n_q + kAttentionTile - 1) / kAttentionTile;
  pool.parallel_for(int64_t{shape.n_kv_heads} * tiles, [&](int64_t b, int64_t e, int) {
    HWY_DYNAMIC_DISPATCH(AttendJobs)(job, b, e);
  });
}
}  // namespace tandem::kernels::cpu
#endif
