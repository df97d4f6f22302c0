#include "speculative/drafter_factory.h"

#include "speculative/lookup_first_drafter.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"

namespace tandem {

std::unique_ptr<Drafter> make_ngram_drafter(int tree) {
  return std::make_unique<NgramDrafter>(4, 1, 0.5, tree > 0 ? 4 : 1);
}

std::unique_ptr<Drafter> make_model_drafter(const Model& draft, const Model& target,
                                            ThreadPool& pool, const KVCacheConfig& cache,
                                            int vocab_limit, int tree, bool lookup_first) {
  // Byte-level BPE vocabularies list tokens roughly by frequency: the first 32768
  // ids cover almost all a model writes, and the draft skips most of its LM head.
  if (vocab_limit < 0) vocab_limit = draft.config().vocab_size > 65536 ? 32768 : 0;
  auto model = std::make_unique<ModelDrafter>(draft, target, pool, cache, vocab_limit, tree);
  if (lookup_first) return std::make_unique<LookupFirstDrafter>(std::move(model));
  return model;
}

}  // namespace tandem
