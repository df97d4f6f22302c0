#include "core/dtype.h"

#include "core/error.h"

namespace tandem {
namespace {

constexpr DTypeInfo kTypes[] = {
    {DType::F32, "F32", 1, 4},       {DType::F16, "F16", 1, 2},
    {DType::BF16, "BF16", 1, 2},     {DType::Q4_0, "Q4_0", 32, 18},
    {DType::Q4_1, "Q4_1", 32, 20},   {DType::Q5_0, "Q5_0", 32, 22},
    {DType::Q5_1, "Q5_1", 32, 24},   {DType::Q8_0, "Q8_0", 32, 34},
    {DType::Q8_1, "Q8_1", 32, 36},   {DType::Q2_K, "Q2_K", 256, 84},
    {DType::Q3_K, "Q3_K", 256, 110}, {DType::Q4_K, "Q4_K", 256, 144},
    {DType::Q5_K, "Q5_K", 256, 176}, {DType::Q6_K, "Q6_K", 256, 210},
    {DType::Q8_K, "Q8_K", 256, 292},
};

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t ggml_type) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == ggml_type) return t;
  return std::nullopt;
}

const DTypeInfo& dtype_info(DType t) {
  for (const auto& info : kTypes)
    if (info.type == t) return info;
  fail("unknown tensor type id {}", static_cast<uint32_t>(t));
}

std::string_view dtype_name(DType t) { return dtype_info(t).name; }

size_t dtype_row_bytes(DType t, int64_t n) {
  const auto& info = dtype_info(t);
  check(n % info.block_size == 0, "{} row of {} elements is not a multiple of the block size {}",
        info.name, n, info.block_size);
  return static_cast<size_t>(n / info.block_size) * info.type_size;
}

bool dtype_is_quantized(DType t) { return dtype_info(t).block_size > 1; }

}  // namespace tandem
