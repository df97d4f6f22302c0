// Matmul for the legacy 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0)
// against Q8Acts. Every type is unpacked into one form, w = ws * u + wm with an
// unsigned code u per element and a float scale ws and offset wm per block:
//   Q4_0: u = q, wm = -8 d     Q4_1: u = q, wm = m
//   Q5_0: u = q, wm = -16 d    Q5_1: u = q, wm = m
//   Q8_0: u = q + 128, wm = -128 d
// so one kernel computes, per block, d_x * ws * sum(u * q_x) + wm * s_x (with
// s_x = d_x * sum(q_x)), the integer sum by vpdpbusd-style dot products.
#include "kernels/cpu/hwy_targets.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/matmul_legacy.cpp"
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

// One weight row unpacked; sized for the row length, reused across calls.
struct LegacyRow {
  std::vector<uint8_t> u;   // Kp codes
  std::vector<float> ws;    // Kp / 4: the block scale once per i32 lane
  std::vector<float> wm;    // nbp offsets
  void resize(int64_t Kp, int64_t nbp) {
    if (static_cast<int64_t>(u.size()) == Kp && static_cast<int64_t>(wm.size()) == nbp) return;
    u.assign(Kp, 0);
    ws.assign(Kp / 4, 0.0f);
    wm.assign(nbp, 0.0f);
  }
};

// Raw pointers into a LegacyRow for the unpackers: stores through uint8_t* may
// alias anything, so going through the vectors would reload their data pointers
// after every store.
struct RowOut {
  uint8_t* u;
  float* ws;
  float* wm;
};

using D16 = hn::CappedTag<uint8_t, 16>;  // unpacking works on 16 packed bytes at a time

// Low and high nibbles of 16 bytes: elements j and j + 16 of a block.
HWY_INLINE void StoreNibbles(const uint8_t* qs, uint8_t* u) {
  const D16 d;
  for (size_t i = 0; i < 16; i += hn::Lanes(d)) {
    const auto v = hn::LoadU(d, qs + i);
    hn::StoreU(hn::And(v, hn::Set(d, 0x0F)), d, u + i);
    hn::StoreU(hn::ShiftRight<4>(v), d, u + 16 + i);
  }
}

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

HWY_INLINE void SetBlockScale(float d, float m, int64_t b, RowOut r) {
  const hn::CappedTag<float, 8> df;
  for (size_t l = 0; l < 8; l += hn::Lanes(df)) hn::StoreU(hn::Set(df, d), df, &r.ws[b * 8 + l]);
  r.wm[b] = m;
}

// Field readers straight from the (unaligned) block bytes. Copying a block into a
// local struct first makes the vector loads that follow wait on store forwarding.
HWY_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

template <class Block, bool kHigh, bool kMin>
HWY_INLINE void UnpackQ4Q5(const uint8_t* src, int64_t nb, float offset, RowOut r) {
  for (int64_t b = 0; b < nb; ++b, src += sizeof(Block)) {
    StoreNibbles(src + offsetof(Block, qs), &r.u[b * 32]);
    if constexpr (kHigh) AddHighBits(src + offsetof(Block, qh), &r.u[b * 32]);
    const float d = HalfAt(src + offsetof(Block, d));
    if constexpr (kMin) {
      SetBlockScale(d, HalfAt(src + offsetof(Block, m)), b, r);
    } else {
      SetBlockScale(d, offset * d, b, r);
    }
  }
}

void UnpackRow(DType type, const uint8_t* src, int64_t nb, LegacyRow& row) {
  const RowOut r{row.u.data(), row.ws.data(), row.wm.data()};
  switch (type) {
    case DType::Q4_0: UnpackQ4Q5<BlockQ4_0, false, false>(src, nb, -8.0f, r); break;
    case DType::Q4_1: UnpackQ4Q5<BlockQ4_1, false, true>(src, nb, 0.0f, r); break;
    case DType::Q5_0: UnpackQ4Q5<BlockQ5_0, true, false>(src, nb, -16.0f, r); break;
    case DType::Q5_1: UnpackQ4Q5<BlockQ5_1, true, true>(src, nb, 0.0f, r); break;
    case DType::Q8_0: {
      const D16 d;
      for (int64_t b = 0; b < nb; ++b, src += sizeof(BlockQ8_0)) {
        const uint8_t* qs = src + offsetof(BlockQ8_0, qs);
        for (size_t i = 0; i < 32; i += hn::Lanes(d))  // signed q -> q + 128
          hn::StoreU(hn::Xor(hn::LoadU(d, qs + i), hn::Set(d, 0x80)), d, &r.u[b * 32 + i]);
        const float df = HalfAt(src + offsetof(BlockQ8_0, d));
        SetBlockScale(df, -128.0f * df, b, r);
      }
      break;
    }
    default:
      break;  // the driver sends only the types above
  }
}

// The dot product of one unpacked weight row with one activation row. Four
// accumulators break the FMA dependency chain; the summation order depends only
// on K, never on the other rows.
HWY_INLINE float DotRow(const LegacyRow& r, const Q8Acts& a, int m) {
  const hn::ScalableTag<uint8_t> du8;
  const hn::Repartition<int8_t, decltype(du8)> di8;
  const hn::Repartition<int32_t, decltype(du8)> di32;
  const hn::Repartition<float, decltype(du8)> df;
  const int8_t* xq = a.row_q(m);
  const float* xd = a.row_d(m);
  const int64_t L = static_cast<int64_t>(hn::Lanes(du8));
  auto step = [&](int64_t k, hn::Vec<decltype(df)> acc) {
    const auto isum = DotU8S8(du8, hn::Zero(di32), hn::LoadU(du8, &r.u[k]), hn::LoadU(di8, xq + k));
    const auto f = hn::Mul(hn::ConvertTo(df, isum), hn::LoadU(df, xd + k / 4));
    return hn::MulAdd(f, hn::LoadU(df, &r.ws[k / 4]), acc);
  };
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df), acc2 = hn::Zero(df), acc3 = hn::Zero(df);
  int64_t k = 0;
  for (; k + 4 * L <= a.Kp; k += 4 * L) {
    acc0 = step(k, acc0);
    acc1 = step(k + L, acc1);
    acc2 = step(k + 2 * L, acc2);
    acc3 = step(k + 3 * L, acc3);
  }
  for (; k < a.Kp; k += L) acc0 = step(k, acc0);
  const float* xs = a.row_s(m);
  const int64_t FL = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t b = 0; b < a.nbp; b += FL)
    acc1 = hn::MulAdd(hn::LoadU(df, &r.wm[b]), hn::LoadU(df, xs + b), acc1);
  const auto sum = hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3));
  return hn::GetLane(hn::SumOfLanes(df, sum));
}

void LegacyChunk(const MatmulChunk& c) {
  static thread_local LegacyRow row;
  const Q8Acts& a = *c.q8;
  row.resize(a.Kp, a.nbp);
  const int64_t nb = c.K / 32;
  for (int64_t n = c.n0; n < c.n1; ++n) {
    UnpackRow(c.type, c.w + n * c.row_bytes, nb, row);
    for (int m = c.m0; m < c.m1; ++m) c.y[m * c.ldy + n] = DotRow(row, a, m);
  }
}

#else   // HWY_SCALAR: no lane-exact integer tricks; use the dequantizing fallback.
void LegacyChunk(const MatmulChunk& c) { matmul_chunk_dequant(c); }
#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace tandem::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tandem::kernels::cpu {
HWY_EXPORT(LegacyChunk);
void matmul_chunk_legacy(const MatmulChunk& c) { HWY_DYNAMIC_DISPATCH(LegacyChunk)(c); }
}  // namespace tandem::kernels::cpu
#endif
