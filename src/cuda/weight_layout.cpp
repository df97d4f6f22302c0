// The device weight layout: the fields of each GGML block type and the planes
// they become.
#include "cuda/weight_layout.h"

#include <cstring>

#include "core/error.h"

namespace tandem::cuda {
namespace {

struct TypeFields {
  int block_elems;
  int block_bytes;
  int n_fields;
  std::array<BlockField, kMaxPlanes> fields;
};

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// The fields of each block type, in the plane order group_decode.h reads. The
// offsets are GGML's (quant/quant_blocks.h); the sizes keep every plane entry
// aligned to its loads: fp16 scales 2 bytes, qh and packed scales a multiple of
// 4, quant codes a multiple of 16.
bool type_fields(DType t, TypeFields& f) {
  switch (t) {
    case DType::F32:
      f = {32, 128, 1, {{{0, 128}}}};
      return true;
    case DType::F16:
    case DType::BF16:
      f = {32, 64, 1, {{{0, 64}}}};
      return true;
    case DType::Q4_0:
      f = {32, 18, 2, {{{0, 2}, {2, 16}}}};
      return true;  // d | qs
    case DType::Q4_1:
      f = {32, 20, 2, {{{0, 4}, {4, 16}}}};
      return true;  // d,m | qs
    case DType::Q5_0:
      f = {32, 22, 3, {{{0, 2}, {2, 4}, {6, 16}}}};
      return true;  // d | qh | qs
    case DType::Q8_0:
      f = {32, 34, 2, {{{0, 2}, {2, 32}}}};
      return true;  // d | qs
    case DType::Q4_K:
      f = {256, 144, 3, {{{0, 4}, {4, 12}, {16, 128}}}};
      return true;
    case DType::Q5_K:
      f = {256, 176, 4, {{{0, 4}, {4, 12}, {16, 32}, {48, 128}}}};
      return true;
    case DType::Q6_K:
      f = {256, 210, 4, {{{0, 128}, {128, 64}, {192, 16}, {208, 2}}}};
      return true;
    default:
      return false;
  }
}

}  // namespace

bool cuda_supports(DType t) {
  TypeFields f;
  return type_fields(t, f);
}

WeightLayout plan_weight_layout(DType t, int64_t k, int64_t n) {
  TypeFields f;
  if (!type_fields(t, f)) fail("CUDA backend: no kernels for weight type {}", dtype_name(t));
  if (k <= 0 || n <= 0 || k % f.block_elems != 0)
    fail("CUDA backend: a {} x {} {} matrix: rows must be a positive multiple of {} elements", n, k,
         dtype_name(t), f.block_elems);
  WeightLayout l;
  l.type = t;
  l.k = k;
  l.n = n;
  l.block_elems = f.block_elems;
  l.block_bytes = f.block_bytes;
  l.blocks_per_row = k / f.block_elems;
  l.n_planes = f.n_fields;
  l.fields = f.fields;
  size_t offset = 0;
  for (int p = 0; p < l.n_planes; ++p) {
    l.plane_offset[p] = offset;
    offset = align_up(offset + static_cast<size_t>(n * l.blocks_per_row) * l.fields[p].bytes,
                      kPlaneAlign);
  }
  l.total_bytes = offset;
  return l;
}

void repack_weights(const WeightLayout& l, const uint8_t* ggml, uint8_t* device) {
  std::memset(device, 0, l.total_bytes);
  const int64_t blocks = l.n * l.blocks_per_row;
  for (int p = 0; p < l.n_planes; ++p) {
    const BlockField f = l.fields[p];
    uint8_t* plane = device + l.plane_offset[p];
    for (int64_t b = 0; b < blocks; ++b)
      std::memcpy(plane + b * f.bytes, ggml + b * l.block_bytes + f.offset, f.bytes);
  }
}

void unpack_weights(const WeightLayout& l, const uint8_t* device, uint8_t* ggml) {
  const int64_t blocks = l.n * l.blocks_per_row;
  for (int p = 0; p < l.n_planes; ++p) {
    const BlockField f = l.fields[p];
    const uint8_t* plane = device + l.plane_offset[p];
    for (int64_t b = 0; b < blocks; ++b)
      std::memcpy(ggml + b * l.block_bytes + f.offset, plane + b * f.bytes, f.bytes);
  }
}

WeightPlanes weight_planes(const WeightLayout& l, const uint8_t* base) {
  WeightPlanes w{};
  for (int p = 0; p < kMaxPlanes; ++p) {
    w.plane[p] = p < l.n_planes ? base + l.plane_offset[p] : nullptr;
    w.field_bytes[p] = p < l.n_planes ? l.fields[p].bytes : 0;
  }
  w.blocks_per_row = l.blocks_per_row;
  return w;
}

bool planes_aligned(const WeightLayout& l, const uint8_t* base) {
  for (int p = 0; p < l.n_planes; ++p) {
    const int bytes = l.fields[p].bytes;
    const size_t align = bytes % 16 == 0 ? 16 : bytes % 4 == 0 ? 4 : 2;
    if (bytes % align != 0 || reinterpret_cast<uintptr_t>(base + l.plane_offset[p]) % align != 0)
      return false;
  }
  return true;
}

}  // namespace tandem::cuda
