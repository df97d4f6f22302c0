// The drafters a front end can ask for, made in one place: the CLI (generate,
// serve, bench) and the tests that mirror it build them the same way.
#pragma once
#include <memory>

#include "cache/kv_cache_factory.h"
#include "core/thread_pool.h"
#include "model/forward_pass.h"
#include "model/model.h"
#include "speculative/drafter.h"

namespace tandem {

// Prompt lookup (ngram_drafter.h); with trees (tree > 0) the continuations of up
// to four earlier occurrences.
std::unique_ptr<Drafter> make_ngram_drafter(int tree);

// Lookup over the request's own text and the recent requests' text of its
// tenant (suffix_drafter.h), in an index of at most budget_tokens tokens; with
// trees (tree > 0) the other source's continuation as a branch.
constexpr size_t kDefaultSuffixBudget = size_t{1} << 20;
std::unique_ptr<Drafter> make_suffix_drafter(int tree, size_t budget_tokens = kDefaultSuffixBudget);

// Where a draft model's lookups come from when they go first
// (lookup_first_drafter.h): none, the request's own text, or that and the
// suffix index of recent requests.
enum class DraftLookup { None, Ngram, Suffix };
// Its name as options and reports give it: "none", "ngram" or "suffix".
const char* draft_lookup_name(DraftLookup lookup);

// A draft model for `target` (model_drafter.h), its KV cache configured as
// `cache` (the engine's: engine_cache_config). vocab_limit: the draft proposes
// only the first N ids plus special tokens; -1 chooses (32768 for vocabularies
// over 65536, else all); 0 is all. tree: siblings beside the main chain (0:
// chains). lookup: matches first where they are accepted at least as often
// (lookup_first_drafter.h), from the source named. Throws tandem::Error when the
// draft cannot stand in for the target. forward_pass: the draft's device (the
// target's; empty: the CPU).
std::unique_ptr<Drafter> make_model_drafter(const Model& draft, const Model& target,
                                            ThreadPool& pool, const KVCacheConfig& cache,
                                            int vocab_limit, int tree, DraftLookup lookup,
                                            size_t suffix_budget = kDefaultSuffixBudget,
                                            const ForwardPassFactory& forward_pass = {});

}  // namespace tandem
