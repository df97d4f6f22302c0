// Tensor element types. Values match GGML's type ids so GGUF files map directly.
// Quantized types store rows as a sequence of fixed-size blocks; block_size()
// elements occupy type_size() bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
};

struct DTypeInfo {
  DType type;
  std::string_view name;
  int block_size;  // elements per block (1 for plain float types)
  int type_size;   // bytes per block
};

// Info for a GGML type id, or nullopt when tandem does not know the type.
std::optional<DTypeInfo> dtype_info(uint32_t ggml_type);
const DTypeInfo& dtype_info(DType t);
std::string_view dtype_name(DType t);
// Bytes taken by n elements (n must be a multiple of the block size).
size_t dtype_row_bytes(DType t, int64_t n);
bool dtype_is_quantized(DType t);

}  // namespace tandem
