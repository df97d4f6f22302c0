// Graph buckets: the batch sizes and token counts, and the choice of one.
#include "cuda/graph_buckets.h"

#include <algorithm>

#include "core/error.h"

namespace tandem::cuda {
namespace {

constexpr int kExactTokens = 8;  // every token count up to this one has its own bucket

// The smallest entry of the ascending list `sizes` that is >= n.
int smallest_at_least(const std::vector<int>& sizes, int n) {
  return *std::lower_bound(sizes.begin(), sizes.end(), n);
}

}  // namespace

GraphBuckets::GraphBuckets(const GraphBucketLimits& limits) {
  if (limits.max_batch < 1 || limits.max_tokens < 1)
    fail("graph buckets: limits must be at least 1 (batch {}, tokens {})", limits.max_batch,
         limits.max_tokens);
  for (int b = 1; b < limits.max_batch; b *= 2) batch_sizes_.push_back(b);
  batch_sizes_.push_back(limits.max_batch);
  for (int t = 1; t <= std::min(kExactTokens, limits.max_tokens); ++t) token_counts_.push_back(t);
  // Past the exact range alternate x1.5 and x4/3 (8 -> 12 -> 16 -> 24 -> 32 ...).
  for (int t = kExactTokens; t < limits.max_tokens;) {
    t = t % 3 == 0 ? t / 3 * 4 : t / 2 * 3;
    token_counts_.push_back(std::min(t, limits.max_tokens));
  }
}

std::vector<GraphBucket> GraphBuckets::all() const {
  std::vector<GraphBucket> out;
  for (int b : batch_sizes_)
    for (int t : token_counts_) out.push_back({b, t});
  return out;
}

GraphBucket GraphBuckets::choose(int batch, int tokens) const {
  if (batch < 1 || tokens < 1 || batch > batch_sizes_.back() || tokens > token_counts_.back())
    fail("graph buckets: a step of {} sequences x {} positions is outside the limits ({} x {})",
         batch, tokens, batch_sizes_.back(), token_counts_.back());
  return {smallest_at_least(batch_sizes_, batch), smallest_at_least(token_counts_, tokens)};
}

}  // namespace tandem::cuda
