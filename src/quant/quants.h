// Block formats of the quantized weight types (GGML layouts) and conversions
// between them and float: the quant layer, below the kernels, which the file
// readers and writers and the KV cache use without the kernels. Scalar and
// exact (the tests' oracle), but for the F16 row conversion, vectorised with
// the same bits.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace tandem {

// Convert n elements (a multiple of the block size) of type t at src to floats.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Convert n floats into type t (round-to-nearest quantization, GGML block layout).
// Supported for every type dequantize_row accepts.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);  // round to nearest even
// n floats to IEEE halves (2n bytes at out, any alignment), as f32_to_f16 each.
void f32_to_f16_row(const float* x, void* out, int64_t n);

}  // namespace tandem
