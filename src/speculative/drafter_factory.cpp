#include "speculative/drafter_factory.h"

#include "speculative/lookup_first_drafter.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"
#include "speculative/suffix_drafter.h"

namespace tandem {

std::unique_ptr<Drafter> make_ngram_drafter(int tree) {
  return std::make_unique<NgramDrafter>(4, 1, 0.5, tree > 0 ? 4 : 1);
}

std::unique_ptr<Drafter> make_suffix_drafter(int tree, size_t budget_tokens) {
  SuffixDrafterOptions o;
  o.budget_tokens = budget_tokens;
  o.branches = tree > 0 ? 2 : 1;
  return std::make_unique<SuffixDrafter>(o);
}

std::unique_ptr<Drafter> make_model_drafter(const Model& draft, const Model& target,
                                            ThreadPool& pool, const KVCacheConfig& cache,
                                            int vocab_limit, int tree, DraftLookup lookup,
                                            size_t suffix_budget,
                                            const ForwardPassFactory& forward_pass) {
  // Byte-level BPE vocabularies list tokens roughly by frequency: the first 32768
  // ids cover almost all a model writes, and the draft skips most of its LM head.
  if (vocab_limit < 0) vocab_limit = draft.config().vocab_size > 65536 ? 32768 : 0;
  auto model =
      std::make_unique<ModelDrafter>(draft, target, pool, cache, vocab_limit, tree, forward_pass);
  if (lookup == DraftLookup::Ngram) return std::make_unique<LookupFirstDrafter>(std::move(model));
  if (lookup == DraftLookup::Suffix) {
    // As the n-gram lookups in front of a model: matches of 2 tokens or more,
    // first assumed accepted at 0.8 so that they get tried.
    SuffixDrafterOptions o;
    o.budget_tokens = suffix_budget;
    o.min_n = 2;
    o.prior = 0.8;
    return std::make_unique<LookupFirstDrafter>(std::move(model),
                                                std::make_unique<SuffixDrafter>(o));
  }
  return model;
}

const char* draft_lookup_name(DraftLookup lookup) {
  switch (lookup) {
    case DraftLookup::Ngram:
      return "ngram";
    case DraftLookup::Suffix:
      return "suffix";
    case DraftLookup::None:
      break;
  }
  return "none";
}

}  // namespace tandem
