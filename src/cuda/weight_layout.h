// How a weight matrix lies in device memory, and the host-side conversion from
// the GGUF bytes to it.
//
// GGML's blocks are packed records (Q4_0: 18 bytes, Q6_K: 210) whose fields sit
// at odd offsets, so a GPU can read them only byte by byte. The device layout
// takes every block apart field by field: plane p holds field p of every block
// of the matrix, row after row, so that each field starts at a multiple of its
// own size's alignment (the 16- and 128-byte quant fields at 16 bytes, the
// 12-byte K-quant scales at 4, the fp16 scales at 2) and the lanes of a warp
// that read field p of neighbouring blocks read neighbouring memory. Each plane
// starts at a multiple of kPlaneAlign. The bytes are the GGUF file's, only
// moved (unpack_weights restores them exactly); group_decode.h decodes them.
//
// Plain C++ (no CUDA): the model's loader repacks on the host before the one
// upload, and the tests run everywhere.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "cuda/group_decode.h"

namespace tandem::cuda {

constexpr size_t kPlaneAlign = 256;  // start of every plane (a full DRAM burst and cache line)

// A field of one GGML block: its byte offset in the block and its size.
struct BlockField {
  int offset = 0;
  int bytes = 0;
};

struct WeightLayout {
  DType type = DType::F32;
  int64_t k = 0;               // elements per row
  int64_t n = 0;               // rows
  int block_elems = 0;         // elements per block (32 for the float types: one group)
  int block_bytes = 0;         // bytes per block in the GGUF layout
  int64_t blocks_per_row = 0;  // k / block_elems
  int n_planes = 0;
  std::array<BlockField, kMaxPlanes> fields{};
  std::array<size_t, kMaxPlanes> plane_offset{};  // from the start of the device copy
  size_t total_bytes = 0;                         // of the device copy, padding included

  int64_t groups_per_row() const { return k / kGroup; }
  // The GGUF size of the matrix (rows x blocks x block bytes).
  size_t ggml_bytes() const { return static_cast<size_t>(n * blocks_per_row) * block_bytes; }
};

// The weight types the CUDA kernels read: every type tandem's models load
// (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K).
bool cuda_supports(DType t);

// The layout of a matrix of n rows of k elements of type t. Throws tandem::Error
// for a type outside cuda_supports or a k that is not a positive multiple of
// the type's block (32, or 256 for the K-quants).
WeightLayout plan_weight_layout(DType t, int64_t k, int64_t n);

// The GGUF bytes of the matrix (layout.ggml_bytes()) into the device layout
// (layout.total_bytes at `device`, padding zeroed), and back.
void repack_weights(const WeightLayout& layout, const uint8_t* ggml, uint8_t* device);
void unpack_weights(const WeightLayout& layout, const uint8_t* device, uint8_t* ggml);

// The planes of a repacked copy at `base` (host or device memory).
WeightPlanes weight_planes(const WeightLayout& layout, const uint8_t* base);

// Whether every load the decoders make from the copy at `base` is aligned: each
// plane whose entries are a multiple of 16 bytes starts at a multiple of 16 (the
// lanes decoder reads it 16 bytes at a time, chunk_decode.h), every other at a
// multiple of its entries' 4- or 2-byte words. A copy planned here at a
// 256-byte boundary always is; the launches check the matrices they get
// (row ranges of a matrix start later in each plane).
bool planes_aligned(const WeightLayout& layout, const uint8_t* base);

}  // namespace tandem::cuda
