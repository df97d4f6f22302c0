// A drafter proposes tokens that the target model then verifies. Four exist: a
// smaller model of the same family (model_drafter.h), prompt lookup over the text
// so far (ngram_drafter.h), lookup over the text so far and recent requests'
// text (suffix_drafter.h), and lookups in front of a draft model
// (lookup_first_drafter.h). Another (say, the target with layers skipped)
// implements this interface and nothing else changes.
//
// A drafter sees requests only through DraftContext. What the draft policy may
// want to know of its costs, and what the scheduler must know of its KV cache,
// are separate small interfaces (draft_hints.h) that a drafter offers or not.
#pragma once
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "speculative/draft_context.h"

namespace tandem {

class DraftCostHints;
class DraftMemory;
class DraftStop;

// The distributions of a draft's tokens (Draft::q): a list whose entries keep
// their buffers (a vocabulary of probabilities each) when the list is cleared or
// shortened, so that drafting round after round allocates nothing once grown.
class DistributionList {
 public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  SamplingDistribution& operator[](size_t i) { return items_[i]; }
  const SamplingDistribution& operator[](size_t i) const { return items_[i]; }
  SamplingDistribution& back() { return items_[n_ - 1]; }
  const SamplingDistribution& back() const { return items_[n_ - 1]; }
  // A new last entry, holding whatever its buffer held last (compute() it, or
  // leave it unread: a tree's later siblings have entries nobody reads).
  SamplingDistribution& emplace_back() {
    if (n_ == items_.size()) items_.emplace_back();
    return items_[n_++];
  }
  void shrink_to(size_t n) { n_ = std::min(n_, n); }
  // Entries for n distributions of n_vocab tokens, ready before they are used.
  void reserve(size_t n, int n_vocab) {
    while (items_.size() < n) items_.emplace_back();
    for (size_t i = 0; i < n; ++i) items_[i].reserve(n_vocab);
  }
  void clear() { n_ = 0; }
  // Entry j moves to i (i <= j): compaction in place, buffers swapped, not freed.
  void move_entry(size_t j, size_t i) {
    if (i != j) std::swap(items_[i], items_[j]);
  }

 private:
  std::vector<SamplingDistribution> items_;
  size_t n_ = 0;
};

struct Draft {
  std::vector<int> tokens;
  // A tree of drafts when not empty: parent[i] is the index of token i's parent
  // (< i), or -1 for a child of the last token the target has. The children of a
  // node hold distinct tokens; the first child is the drafter's likeliest and
  // its descendants through first children form the main chain. Empty: tokens
  // are a chain (parent[i] == i - 1).
  std::vector<int> parent;
  // q[i]: the distribution tokens[i] was sampled from, after the request's own
  // sampling transforms. Empty when the drafter is deterministic or the request
  // is greedy: q is then a point mass on each token. In a tree only a node's
  // first child carries its q; later siblings were drawn from it without
  // replacement (each with the earlier siblings removed) and have an empty entry.
  DistributionList q;
  // confidence[i]: the drafter's probability of tokens[i] (a draft model's, after
  // the request's transforms; see speculative/draft_stop.h), for the main chain's
  // tokens. Empty when it has none.
  std::vector<float> confidence;
  // The drafter's own estimate of the per-token acceptance of this proposal
  // (negative: none; the request's running estimate is used instead), and a tag
  // it can use to learn from the verdict (e.g. the n-gram length that matched).
  double alpha = -1;
  int tag = 0;

  bool is_tree() const { return !parent.empty(); }
  // Length of the main chain: the leading tokens whose parent is the one before.
  int chain_length() const;
  // The most tokens one round can accept: the tree's depth (a chain's length).
  int depth() const;
  // Keep the first `chain` tokens of the main chain and, of the other nodes,
  // those within that depth whose parents are kept, at most `extra` of them in
  // index order. A tree left with no node off the main chain becomes a chain.
  void prune(int chain, int extra);

  // Room for a draft of n tokens (a tree's nodes included), and for what
  // depth() and prune() work with: they then allocate nothing.
  void reserve(int n);

  void clear() {
    tokens.clear();
    parent.clear();
    q.clear();
    confidence.clear();
    alpha = -1;
    tag = 0;
  }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Propose up to k[i] tokens continuing reqs[i].tokens into out[i] (fewer, even
  // none, when the drafter has nothing good to offer or no room). Returns the
  // milliseconds of one steady-state draft step (one token per request, not a
  // catch-up), or a negative value when this call had none to measure. A drafter
  // that drafts step by step asks `stop` (if given) after each step whether a
  // request's next token is worth drafting.
  virtual double propose(std::span<const DraftContext> reqs, std::span<const int> k,
                         std::vector<Draft>& out, const DraftStop* stop = nullptr) = 0;
  // A round ended and req.tokens now holds what the target kept: drop any state
  // built on rejected drafts. `draft` (as verified) had its first `accepted`
  // tokens accepted.
  virtual void sync(const DraftContext& req, const Draft& draft, int accepted) {}
  // The request finished (not preempted) with req.tokens, its prompt and output:
  // a drafter that drafts from other requests' text takes it here
  // (suffix_drafter.h). release() follows.
  virtual void finished(const DraftContext& req) {}
  // The request left (finished, or preempted to be recomputed later): free what
  // the drafter holds for it.
  virtual void release(int request_id) {}
  // Proposals cost (almost) nothing, so the runner asks for the longest it may
  // verify and the policy keeps only the part worth verifying. Otherwise the
  // policy decides the lengths first and the drafter proposes exactly those.
  virtual bool free_proposals() const { return false; }

  // The optional interfaces of draft_hints.h; null where the drafter has none.
  virtual const DraftCostHints* cost_hints() const { return nullptr; }
  virtual DraftMemory* memory() { return nullptr; }
};

}  // namespace tandem
