// Building a KV cache backend from configuration: contiguous slots (a few
// sequences, simplest) or paged blocks with prefix caching (a server's many
// sequences sharing one pool).
#pragma once
#include <cstdint>
#include <memory>

#include "cache/kv_cache.h"

namespace tandem {

struct KVCacheConfig {
  enum class Kind { Contiguous, Paged };
  Kind kind = Kind::Contiguous;
  int n_slots = 1;
  int n_ctx = 4096;         // contiguous: positions per slot
  int64_t n_positions = 0;  // paged: positions in the pool (0: n_slots * n_ctx)
  int block_size = 16;      // paged
  // Paged: requests may share the blocks of a common prefix (attach_prefix,
  // publish_prefix). The engine sets it from EngineOptions::prefix_cache, and a
  // draft model's cache follows the target's.
  bool share_prefixes = false;
  DType type = DType::F16;
};

std::unique_ptr<KVCache> make_kv_cache(const KVCacheShape& shape, const KVCacheConfig& c);

}  // namespace tandem
