// Accept or reject drafted tokens against the target's logits.
//
// Deterministic choice (greedy, and sampling in reproducible mode): the target's
// own token at each row is a function of the row (greedy: the argmax; reproducible:
// the Gumbel-max choice with noise keyed by (seed, position, token),
// sampling/gumbel_sampler.h). A drafted token is accepted while it equals that
// choice; the first mismatch yields the target's token; if all match, the bonus
// token is the choice after the last draft. The output is then token for token
// what plain decoding gives, whatever was drafted.
// Optimal mode (Leviathan et al., 2023, Algorithm 1): accept draft t_i with
// probability min(1, p(t_i) / q(t_i)); at the first rejection draw from
// norm(max(0, p - q)) and stop; if all are accepted, draw the bonus from p after
// the last draft. p and q carry the request's own sampling transforms, so the
// emitted tokens have exactly the distribution of plain sampling. A point-mass q
// (deterministic drafter or greedy draft) accepts with probability p(t_i) and
// draws the correction from p with t_i removed.
//
// Tree drafts (Draft::parent): walking down from the root, the children of the
// node reached are tried in order. Deterministic choice: the child equal to the
// target's token is accepted, otherwise that token ends the round. Optimal mode:
// recursive rejection sampling (Jeon et al., 2024, "Recursive Speculative
// Decoding"; with point-mass candidates it is SpecInfer's multi-step speculative
// sampling, Miao et al., 2024): child c_j is accepted with probability
// min(1, p_j(c_j) / q_j(c_j)); on rejection p_{j+1} = norm(max(0, p_j - q_j)) and
// q_{j+1} = norm(q_j without c_j), since the siblings were drawn from q without
// replacement (a point mass: p_{j+1} is p_j without c_j). When every child is
// rejected the token is drawn from the last residual, and below an accepted leaf
// it is the bonus, drawn from p. The emitted tokens have exactly the distribution
// of plain sampling.
//
// A constraint (sampling/constraint.h) masks every row with the state reached by
// the tokens before it, so p is the constrained distribution at each position.
#pragma once
#include <span>
#include <vector>

#include "sampling/constraint.h"
#include "sampling/gumbel_sampler.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "speculative/drafter.h"

namespace tandem {

struct Verdict {
  int n_accepted = 0;     // leading drafted tokens kept (of a tree: the accepted path's length)
  int token = -1;         // the target's own token after them (correction or bonus)
  std::vector<int> path;  // a tree's accepted nodes, root first (empty for a chain)
};

// What else a verification applies and reports: the request's constraint (its
// state after `context`; null: none), and with top_logprobs >= 0 the
// log-probabilities of each emitted token (accepted drafts, then the target's
// own token) with that many alternatives, into *logprobs.
struct VerifyExtras {
  const TokenConstraint* constraint = nullptr;
  int top_logprobs = -1;
  std::vector<TokenLogprobs>* logprobs = nullptr;
};

// Scratch that distributions, residuals and the Gumbel choice reuse from one
// verification to the next (grown once, then no allocation per token).
struct VerifyScratch {
  SamplingDistribution p;
  GumbelSampler gumbel;
  std::vector<float> residual, q_rest;
  std::vector<int> candidates;
  std::vector<int> child_start, child_list;  // a tree's children, node by node
};

// logits: draft.tokens.size() + 1 rows of n_vocab target logits; row i predicts
// draft token i (row k predicts the bonus). For a tree, row 0 predicts the
// root's children and row 1 + j the children of node j. Rows are modified (repetition
// penalty, constraint mask). `context` is the sequence's tokens; the penalty of
// row i also sees drafts 0..i-1, and row i chooses the token at position
// context.size() + i (a tree's row, at its depth). An empty draft samples one
// token (the first after a prefill). `rng` serves optimal mode's draws only.
// The verdict goes into `out`, scratch is reused: no allocation once they have
// grown.
void verify_draft(float* logits, int n_vocab, const Draft& draft, const SamplingParams& params,
                  const std::vector<int>& context, Rng& rng, const VerifyExtras& extras,
                  VerifyScratch& scratch, Verdict& out);
// The same with scratch of its own (tests).
Verdict verify_draft(float* logits, int n_vocab, const Draft& draft, const SamplingParams& params,
                     const std::vector<int>& context, Rng& rng, const VerifyExtras& extras = {});

// Recursive rejection sampling among the candidate tokens `children` (distinct)
// drawn from q1 in order without replacement (q1 null: fixed candidates, point
// masses), exposed for the statistical tests. Returns the index of the accepted
// candidate, or -1 with *token the draw from the final residual.
int accept_among(const SamplingDistribution& p, const SamplingDistribution* q1,
                 const std::vector<int>& children, Rng& rng, int* token,
                 VerifyScratch* scratch = nullptr);

// One accept/reject decision with explicit distributions (exposed for the
// statistical tests). q null means a point mass on `token`. Returns true when the
// token is accepted; otherwise *correction receives the residual draw.
bool accept_or_resample(const SamplingDistribution& p, const SamplingDistribution* q, int token,
                        Rng& rng, int* correction, VerifyScratch* scratch = nullptr);

}  // namespace tandem
