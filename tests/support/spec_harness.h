// Speculative decoding on synthetic models, for the tests: a target with three
// drafts (the same weights rounded to Q8_0 in the file, the same again
// requantized to Q4_0 at load, and unrelated one-layer weights),
// engines over any drafter, and the exact distribution sampling should follow.
#pragma once
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "sampling/constraint.h"
#include "speculative/drafter.h"
#include "support/synthetic_model.h"

namespace tandem::test {

// Five prompts: random, and repetitive ones that give the n-gram drafter matches.
std::vector<std::vector<int>> spec_prompts(int vocab);

// OtherLookup: the other draft model behind n-gram lookups (LookupFirstDrafter).
// Suffix: lookups in the request's text and in the earlier requests' text of
// the same run (suffix_drafter.h); OtherSuffixLookup: those in front of Other.
// SameRequantized: the target's file loaded as a draft model is by default
// (model/requantize.h).
enum class DraftKind {
  None,
  SameQuantized,
  Other,
  Ngram,
  OtherLookup,
  Suffix,
  OtherSuffixLookup,
  SameRequantized
};

struct Models {
  std::unique_ptr<Model> target, same_q8, same_q4, other;
};
Models load_models(Arch arch, int vocab, bool tokenizer);

// Drafters see requests as DraftContexts.
double propose(Drafter& drafter, const std::vector<Sequence*>& seqs, const std::vector<int>& k,
               std::vector<Draft>& out);

// Run the requests through an engine (n_ctx 256; one thread unless told) with
// the drafter of `kind`; drafts are verified even where they do not pay (no
// opting out). forward_pass: the device of the target and of a draft model
// (empty: the CPU).
std::vector<RequestResult> run(const Models& m, DraftKind kind, SpecOptions so,
                               const std::vector<Request>& reqs, int max_batch = 1, int threads = 1,
                               const ForwardPassFactory& forward_pass = {});

Request greedy_request(std::vector<int> prompt, int n);

// `trials` sampled requests of four tokens each (with K = 2 one round drafts
// tokens 2 and 3 and verifies both; the distribution tests look at the first
// three), seeded first_seed, first_seed + 1, ...
std::vector<Request> sampled_trials(const std::vector<int>& prompt, const SamplingParams& sp,
                                    int trials, uint64_t first_seed);

// The joint distribution of the first three sampled tokens, exactly, from the
// model's logits: p(t1) p(t2 | t1) p(t3 | t1, t2) under the sampling transforms
// and, if given, the constraint (started fresh after the prompt).
std::vector<double> exact_joint(const Model& m, const std::vector<int>& prompt,
                                const SamplingParams& sp,
                                const TokenConstraint* constraint = nullptr);

}  // namespace tandem::test
