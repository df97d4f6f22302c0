// Block formats of the quantized weight types (GGML layouts) and conversions
// between them and float. These are the scalar reference: simple, exact, used
// by tests as the oracle and by loaders/writers.
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

}  // namespace tandem
