#include "support/random_weights.h"

#include <algorithm>
#include <random>

#include "quant/quants.h"

namespace tandem::test {

TensorView RandomMatrix::view() const {
  TensorView v;
  v.name = std::string(1, 'w');  // (= "w" trips GCC 12's false -Wrestrict)
  v.type = type;
  v.shape = {k, n};
  v.data = bytes.data();
  v.nbytes = bytes.size();
  return v;
}

std::vector<float> random_floats(int64_t count, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(count));
  for (auto& v : x) v = dist(rng);
  return x;
}

RandomMatrix random_matrix(DType t, int64_t k, int64_t n, uint32_t seed) {
  std::vector<float> w = random_floats(k * n, seed);
  std::fill(w.begin(), w.begin() + std::min<int64_t>(32, k), 0.0f);
  if (n > 1) w[k + 5] = 30.0f;
  RandomMatrix m;
  m.type = t;
  m.k = k;
  m.n = n;
  const size_t row_bytes = dtype_row_bytes(t, k);
  m.bytes.resize(row_bytes * n);
  m.deq.resize(w.size());
  for (int64_t r = 0; r < n; ++r) {
    quantize_row(t, &w[r * k], m.bytes.data() + r * row_bytes, k);
    dequantize_row(t, m.bytes.data() + r * row_bytes, &m.deq[r * k], k);
  }
  return m;
}

}  // namespace tandem::test
