// The drafters a front end can ask for, made in one place: the CLI (generate,
// serve, bench) and the tests that mirror it build them the same way.
#pragma once
#include <memory>

#include "cache/kv_cache_factory.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "speculative/drafter.h"

namespace tandem {

// Prompt lookup (ngram_drafter.h); with trees (tree > 0) the continuations of up
// to four earlier occurrences.
std::unique_ptr<Drafter> make_ngram_drafter(int tree);

// A draft model for `target` (model_drafter.h), its KV cache configured as
// `cache` (the engine's: engine_cache_config). vocab_limit: the draft proposes
// only the first N ids plus special tokens; -1 chooses (32768 for vocabularies
// over 65536, else all); 0 is all. tree: siblings beside the main chain (0:
// chains). lookup_first: n-gram matches first where they are accepted at least
// as often (lookup_first_drafter.h). Throws tandem::Error when the draft cannot
// stand in for the target.
std::unique_ptr<Drafter> make_model_drafter(const Model& draft, const Model& target,
                                            ThreadPool& pool, const KVCacheConfig& cache,
                                            int vocab_limit, int tree, bool lookup_first);

}  // namespace tandem
