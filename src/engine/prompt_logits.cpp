#include "engine/prompt_logits.h"

#include "cache/contiguous_kv_cache.h"
#include "core/error.h"
#include "model/transformer.h"

namespace tandem {

std::vector<float> prompt_logits(const Model& model, ThreadPool& pool, const std::vector<int>& ids,
                                 DType kv_type) {
  check(!ids.empty(), "no input tokens");
  const int n = static_cast<int>(ids.size());
  check(n <= model.config().context_length, "{} tokens exceed the model's context length {}", n,
        model.config().context_length);
  Transformer tf(model, pool);
  ContiguousKVCache cache(tf.cache_shape(), 1, n, kv_type);
  ForwardBatch b;
  b.add_sequence(cache.allocate(), ids.data(), n, 0, true, false);
  std::vector<float> logits(static_cast<size_t>(n) * tf.vocab_size());
  tf.forward(b, cache, logits.data());
  return logits;
}

}  // namespace tandem
