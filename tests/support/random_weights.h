// Random weight matrices and activations for the kernel tests: normal values
// quantized into any weight type (GGUF bytes), the same matrix dequantized, and
// rows of activations with the quantization edge cases in them.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tandem::test {

// Every weight type tandem loads (the types of the kernel tests' matrices).
inline constexpr DType kLoadedTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,
                                         DType::Q4_1, DType::Q5_0, DType::Q8_0, DType::Q4_K,
                                         DType::Q5_K, DType::Q6_K};

struct RandomMatrix {
  DType type = DType::F32;
  int64_t k = 0, n = 0;
  std::vector<uint8_t> bytes;  // n rows of k elements in the GGUF layout
  std::vector<float> deq;      // the same, dequantized (the reference's view)
  TensorView view() const;     // over `bytes`, shape {k, n}
};

// n rows of k values ~ N(0, 1) quantized to t (seeded: the same every run); one
// block of row 0 is all zero and row 1 has an outlier (scales at their edges).
RandomMatrix random_matrix(DType t, int64_t k, int64_t n, uint32_t seed);

// count values ~ N(0, scale^2), seeded.
std::vector<float> random_floats(int64_t count, uint32_t seed, float scale = 1.0f);

}  // namespace tandem::test
