// A non-owning view of a weight tensor as stored in a model file.
// Shapes use GGML order: shape[0] is the contiguous row length (the inner
// dimension), shape[1] the number of rows. A matrix W with shape {K, N} maps
// K inputs to N outputs: row n holds the K weights of output n.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tandem {

struct TensorView {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> shape;  // GGML order, shape[0] innermost
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  // The same matrix in the layout this machine's matmul prefers, when the model
  // made one at load (kernels::pack_weights); null otherwise. `data` stays valid.
  const uint8_t* packed = nullptr;

  int64_t ne(size_t i) const { return i < shape.size() ? shape[i] : 1; }
  int64_t numel() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  size_t row_bytes() const { return dtype_row_bytes(type, ne(0)); }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes(); }
  bool empty() const { return data == nullptr; }
};

}  // namespace tandem
