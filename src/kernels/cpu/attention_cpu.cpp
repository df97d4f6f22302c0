// Fused causal attention over the KV cache with an online softmax.
//
// Work is split by (KV head, tile of up to kTile query rows). A job walks the
// cache in blocks of kKeyBlock positions, widens each block's K and V rows of its
// KV head to F32 once and applies them to every query head of the group and
// every row of the tile (GQA: each KV head is read once per tile). Key blocks
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

HWY_INLINE float Dot(const float* a, const float* b, int n) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df);
  int i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    a0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), a0);
    a1 = hn::MulAdd(hn::LoadU(df, a + i + L), hn::LoadU(df, b + i + L), a1);
  }
  for (; i + L <= n; i += L) a0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), a0);
  float s = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1)));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// o = o * c + p * v over n values.
HWY_INLINE void ScaleAdd(float* o, float c, float p, const float* v, int n) {
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  const auto vc = hn::Set(df, c), vp = hn::Set(df, p);
  int i = 0;
  for (; i + L <= n; i += L)
    hn::StoreU(hn::MulAdd(hn::LoadU(df, v + i), vp, hn::Mul(hn::LoadU(df, o + i), vc)), df, o + i);
  for (; i < n; ++i) o[i] = o[i] * c + p * v[i];
}

// Online-softmax state of one (row, head): running max, denominator, output.
struct RowState {
  float max = -INFINITY, denom = 0.0f;
};

void AttendTile(const Job& job, int g, int r0, int r1) {
  const AttentionShape& sh = *job.shape;
  const int hd = sh.head_dim, group = sh.n_heads / sh.n_kv_heads;
  const int row_elems = sh.n_kv_heads * hd;
  const size_t q_stride = static_cast<size_t>(sh.n_heads) * hd;
  static thread_local std::vector<float> kbuf, vbuf, obuf;
  kbuf.resize(size_t(kKeyBlock) * hd);
  vbuf.resize(size_t(kKeyBlock) * hd);
  obuf.assign(size_t(r1 - r0) * group * hd, 0.0f);
  RowState state[kTile * 64];  // group <= 64 is checked by the caller
  for (int i = 0; i < (r1 - r0) * group; ++i) state[i] = RowState{};

  int last = 0;
  for (int i = r0; i < r1; ++i) last = std::max(last, job.pos[i]);
  const hn::ScalableTag<float> df;
  const int L = static_cast<int>(hn::Lanes(df));
  alignas(64) float scores[kKeyBlock];
  for (int p0 = 0; p0 <= last; p0 += kKeyBlock) {
    const int p1 = std::min(p0 + kKeyBlock, last + 1);
    for (int p = p0; p < p1; ++p) {
      LoadHead(job.kv->k_blocks, *job.kv, p, row_elems, g, hd, &kbuf[size_t(p - p0) * hd]);
      LoadHead(job.kv->v_blocks, *job.kv, p, row_elems, g, hd, &vbuf[size_t(p - p0) * hd]);
    }
    for (int i = r0; i < r1; ++i) {
      if (job.pos[i] < p0) continue;
      const int n = std::min(p1, job.pos[i] + 1) - p0;  // keys of this block row i sees
      for (int hh = 0; hh < group; ++hh) {
        const int h = g * group + hh;
        const float* qh = job.q + i * q_stride + size_t(h) * hd;
        RowState& st = state[(i - r0) * group + hh];
        float* o = &obuf[(size_t(i - r0) * group + hh) * hd];
        float block_max = -INFINITY;
        for (int j = 0; j < n; ++j) {
          scores[j] = Dot(qh, &kbuf[size_t(j) * hd], hd) * sh.scale;
          block_max = std::max(block_max, scores[j]);
        }
        for (int j = n; j < kKeyBlock; ++j) scores[j] = -INFINITY;
        const float new_max = std::max(st.max, block_max);
        // exp(-inf) = 0: the first block rescales nothing.
        const float correction = st.max == -INFINITY ? 0.0f : std::exp(st.max - new_max);
        const auto vmax = hn::Set(df, new_max);
        for (int j = 0; j < kKeyBlock; j += L) {
          const auto s = hn::LoadU(df, scores + j);
          const auto valid = hn::Lt(hn::Iota(df, static_cast<float>(j)), hn::Set(df, float(n)));
          hn::StoreU(hn::IfThenElseZero(valid, hn::Exp(df, hn::Sub(s, vmax))), df, scores + j);
        }
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) sum += scores[j];
        st.denom = st.denom * correction + sum;
        st.max = new_max;
        ScaleAdd(o, correction, scores[0], &vbuf[0], hd);
        for (int j = 1; j < n; ++j) ScaleAdd(o, 1.0f, scores[j], &vbuf[size_t(j) * hd], hd);
      }
    }
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
