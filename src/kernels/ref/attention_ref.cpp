// Reference attention: for each query row and head, scores against every cached
// position up to its own, a numerically stable softmax, and the weighted sum of
// values. Grouped-query: query head h reads KV head h / (n_heads / n_kv_heads).
#include <cmath>
#include <vector>

#include "kernels/ref/ref_kernels.h"
#include "quant/quants.h"

namespace tandem::kernels::ref {
namespace {

// Cached row of logical position `p` (n_kv_heads * head_dim values) of K or V as floats.
void load_row(const void* const* blocks, const KVSeqView& kv, int logical, int row_elems,
              float* out) {
  const int p = kv.physical(logical);
  const auto* block = static_cast<const uint8_t*>(blocks[p / kv.block_size]);
  const size_t row_bytes = dtype_row_bytes(kv.type, row_elems);
  dequantize_row(kv.type, block + static_cast<size_t>(p % kv.block_size) * row_bytes, out,
                 row_elems);
}

}  // namespace

void attention(const float* q, int n_q, const int* pos, const KVSeqView& kv,
               const AttentionShape& shape, float* out, ThreadPool& pool) {
  const int hd = shape.head_dim, group = shape.n_heads / shape.n_kv_heads;
  const int row_elems = shape.n_kv_heads * hd;
  const size_t q_stride = static_cast<size_t>(shape.n_heads) * hd;
  pool.parallel_for(int64_t{n_q} * shape.n_heads, [&](int64_t b, int64_t e, int) {
    std::vector<float> krow(row_elems), vrow(row_elems), scores;
    for (int64_t job = b; job < e; ++job) {
      const int i = static_cast<int>(job / shape.n_heads),
                h = static_cast<int>(job % shape.n_heads);
      const int kvh = h / group;
      const float* qh = q + i * q_stride + static_cast<size_t>(h) * hd;
      float* oh = out + i * q_stride + static_cast<size_t>(h) * hd;
      const int n_keys = pos[i] + 1;
      scores.resize(n_keys);
      float max_score = -INFINITY;
      for (int p = 0; p < n_keys; ++p) {
        load_row(kv.k_blocks, kv, p, row_elems, krow.data());
        float dot = 0.0f;
        for (int d = 0; d < hd; ++d) dot += qh[d] * krow[kvh * hd + d];
        scores[p] = dot * shape.scale;
        max_score = std::max(max_score, scores[p]);
      }
      float denom = 0.0f;
      for (int p = 0; p < n_keys; ++p) {
        scores[p] = std::exp(scores[p] - max_score);
        denom += scores[p];
      }
      for (int d = 0; d < hd; ++d) oh[d] = 0.0f;
      for (int p = 0; p < n_keys; ++p) {
        load_row(kv.v_blocks, kv, p, row_elems, vrow.data());
        const float w = scores[p] / denom;
        for (int d = 0; d < hd; ++d) oh[d] += w * vrow[kvh * hd + d];
      }
    }
  });
}

}  // namespace tandem::kernels::ref
