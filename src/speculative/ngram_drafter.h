// Prompt lookup: if the last n tokens (n = max_n down to 1) occurred earlier in
// the prompt or the generated text, propose what followed their most recent
// earlier occurrence. No model, near-zero cost, and very effective when the
// output copies from the input (edits, summaries with quotes, code refactors).
// With branches > 1 the proposal is a tree: the continuations of up to that many
// earlier occurrences (longer matches first, the most recent first within a
// length) merged where they agree, the first of them its main chain; the draft
// policy keeps the part worth verifying.
#pragma once
#include <unordered_map>

#include "speculative/adaptive_k.h"
#include "speculative/drafter.h"

namespace tandem {

class NgramDrafter final : public Drafter {
 public:
  // Matches of max_n down to min_n tokens are tried. prior: the acceptance a
  // request's lookups are first assumed to have, at every match length.
  explicit NgramDrafter(int max_n = 4, int min_n = 1, double prior = 0.5, int branches = 1);
  std::string name() const override { return "ngram"; }
  double propose(std::span<const DraftContext> reqs, std::span<const int> k,
                 std::vector<Draft>& out, const DraftStop* stop = nullptr) override;
  void sync(const DraftContext& req, const Draft& draft, int accepted) override;
  void release(int request_id) override;
  bool free_proposals() const override { return true; }

  // The lookup itself, on a plain token list: up to k continuation tokens; *n_out
  // (if given) receives the length of the match (0: none), *from_out (if given)
  // where the continuation starts in `tokens`.
  // lookup() into `out` (its buffer reused).
  static void lookup_into(std::span<const int> tokens, int k, int max_n, int min_n,
                          std::vector<int>& out, int* n_out = nullptr, int* from_out = nullptr);
  static std::vector<int> lookup(std::span<const int> tokens, int k, int max_n, int min_n = 1,
                                 int* n_out = nullptr);
  // Up to `count` distinct continuations (each up to k tokens), most trusted
  // first; the first is lookup()'s. *n_out as for lookup().
  static std::vector<std::vector<int>> continuations(std::span<const int> tokens, int k, int max_n,
                                                     int min_n, int count, int* n_out = nullptr);
  // The same into the first entries of `out` (grown to `count` entries, their
  // buffers reused); returns how many were found.
  static size_t continuations_into(std::span<const int> tokens, int k, int max_n, int min_n,
                                   int count, std::vector<std::vector<int>>& out,
                                   int* n_out = nullptr);
  // Merge continuations into a draft tree (a chain when they share one path):
  // the first is the main chain; each other adds the nodes where it departs.
  static void merge_into(std::span<const std::vector<int>> conts, Draft& d);
  static void merge_into(const std::vector<std::vector<int>>& conts, Draft& d);
  // Cut a proposal at its first token the constraint (in its current state)
  // does not allow: what follows could never be accepted.
  static void keep_within(const TokenConstraint& constraint, std::vector<int>& tokens);

 private:
  int max_n_, min_n_;
  double prior_;
  int branches_;
  // Acceptance of proposals by the length of the match that produced them:
  // a 4-token match in copied text is far more reliable than a 1-token one.
  // Kept per request: how predictable text is depends on the request (a copy
  // task against free prose), so one request's misses must not silence another.
  std::vector<AcceptanceEstimate>& evidence(int request_id);           // index: match length
  std::unordered_map<int, std::vector<AcceptanceEstimate>> evidence_;  // by request id
  // The same over every request so far. A new request starts from it where it
  // is above the prior (copy-heavy traffic: long matches are trusted from the
  // first round instead of after a ramp of short drafts), from the prior
  // otherwise (so that no request is kept from trying lookups by others' misses).
  std::vector<AcceptanceEstimate> overall_;
  std::vector<std::vector<int>> conts_;               // propose()'s continuations, reused
  static constexpr size_t kContinuationReserve = 64;  // tokens each, as long as drafts go
};

}  // namespace tandem
