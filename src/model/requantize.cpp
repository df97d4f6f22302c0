#include "model/requantize.h"

#include <vector>

#include "core/error.h"
#include "quant/quants.h"

namespace tandem {

std::optional<Requantization> parse_requantization(const std::string& value) {
  if (value == "none") return std::nullopt;
  if (value == "q4_0") return Requantization{DType::Q4_0};
  fail("'{}' is not a draft quantization: q4_0 or none", value);
}

namespace {
// Bytes a weight of `t` takes, as a fraction (bytes per block over its elements).
double bytes_per_weight(DType t) {
  const DTypeInfo& info = dtype_info(t);
  return static_cast<double>(info.type_size) / info.block_size;
}
}  // namespace

bool requantizes(const TensorView& W, DType to) {
  return W.shape.size() == 2 && W.ne(0) % dtype_info(to).block_size == 0 &&
         bytes_per_weight(W.type) > bytes_per_weight(to);
}

AlignedVector<uint8_t> requantize(const TensorView& W, DType to, ThreadPool& pool) {
  check(requantizes(W, to), "{}: a {} matrix of rows of {} is not requantized into {}", W.name,
        dtype_name(W.type), W.ne(0), dtype_name(to));
  const int64_t K = W.ne(0), N = W.ne(1);
  const size_t out_row = dtype_row_bytes(to, K);
  AlignedVector<uint8_t> out(out_row * static_cast<size_t>(N));
  pool.parallel_for(N, [&](int64_t begin, int64_t end, int) {
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = begin; n < end; ++n) {
      dequantize_row(W.type, W.row(n), row.data(), K);
      quantize_row(to, row.data(), out.data() + static_cast<size_t>(n) * out_row, K);
    }
  });
  return out;
}

}  // namespace tandem
