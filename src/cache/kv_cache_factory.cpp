#include "cache/kv_cache_factory.h"

#include "cache/contiguous_kv_cache.h"
#include "cache/paged_kv_cache.h"
#include "core/error.h"

namespace tandem {

std::unique_ptr<KVCache> make_kv_cache(const KVCacheShape& shape, const KVCacheConfig& c) {
  if (c.kind == KVCacheConfig::Kind::Contiguous)
    return std::make_unique<ContiguousKVCache>(shape, c.n_slots, c.n_ctx, c.type);
  check(c.block_size >= 1, "KV cache block size must be >= 1, got {}", c.block_size);
  const int64_t positions = c.n_positions > 0 ? c.n_positions : int64_t{c.n_slots} * c.n_ctx;
  const int64_t blocks = (positions + c.block_size - 1) / c.block_size;
  check(blocks <= INT32_MAX, "KV cache of {} positions is too large", positions);
  return std::make_unique<PagedKVCache>(shape, c.n_slots, static_cast<int>(blocks), c.block_size,
                                        c.type);
}

}  // namespace tandem
