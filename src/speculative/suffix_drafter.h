// Lookup across requests (`--draft suffix`): prompt lookup over the request's
// own text, as the n-gram drafter does, and over a SuffixIndex
// (suffix_index.h) of the prompts and outputs of the requests that finished
// before it, after SuffixDecoding (Oliaro et al., arXiv 2411.04975). Agent
// sessions resend tool-call scaffolding, JSON keys and code that earlier turns
// and other sessions wrote; those continuations are drafted for free.
//
// Which proposal is taken: the longer match. The request's own match is
// extended backwards to its full length, so a long match in the request's own
// text beats a short one elsewhere, and the shared index wins only where its
// match is strictly longer. Acceptance is learned per request, per source and
// per match length (as the n-gram drafter learns it per match length), and the
// draft policy keeps the part worth verifying.
//
// Isolation: a request only reads documents of its own tenant
// (DraftContext::tenant), and its own text joins the index under that tenant
// when it finishes. Memory is the index's budget, fixed at construction.
#pragma once
#include <unordered_map>

#include "speculative/adaptive_k.h"
#include "speculative/drafter.h"
#include "speculative/suffix_index.h"

namespace tandem {

struct SuffixDrafterOptions {
  size_t budget_tokens = size_t{1} << 20;  // the shared index's text: ~16 MB
  int max_n = 4;                           // own-text lookups: max_n down to min_n tokens
  int min_n = 1;
  // The shortest match taken from other requests' text: shorter ones are too
  // often a coincidence of common tokens.
  int min_shared_match = 4;
  double prior = 0.5;  // the acceptance a request's lookups are first assumed to have
  int branches = 1;    // > 1: the other source's continuation as a branch of a tree
};

class SuffixDrafter final : public Drafter {
 public:
  explicit SuffixDrafter(SuffixDrafterOptions options = {});
  std::string name() const override { return "suffix"; }
  double propose(std::span<const DraftContext> reqs, std::span<const int> k,
                 std::vector<Draft>& out, const DraftStop* stop = nullptr) override;
  void sync(const DraftContext& req, const Draft& draft, int accepted) override;
  void finished(const DraftContext& req) override;
  void release(int request_id) override;
  bool free_proposals() const override { return true; }

  const SuffixIndex& index() const { return index_; }

  // Draft tags: the match length's bucket, shifted by kBuckets for the shared
  // index (0: no proposal). Lookup-first drafting reads any tag > 0 as a lookup.
  static constexpr int kBuckets = 8;
  static int tag_of(int match_length, bool shared);

 private:
  // This request's proposal from `tokens` (its own text) and the index, into d.
  void propose_one(const DraftContext& req, int k, Draft& d);
  std::vector<AcceptanceEstimate>& evidence(int request_id);

  SuffixDrafterOptions opt_;
  SuffixIndex index_;
  std::unordered_map<int, std::vector<AcceptanceEstimate>> evidence_;  // by request id
  // Every request's verdicts, by tag: a new request starts from them where they
  // are better than the prior (see NgramDrafter).
  std::vector<AcceptanceEstimate> overall_;
  // This round's continuations, reused.
  std::vector<int> own_, shared_;
  std::vector<std::vector<int>> conts_;
};

}  // namespace tandem
