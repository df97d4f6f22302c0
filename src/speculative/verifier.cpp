#include "speculative/verifier.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include "core/error.h"

namespace tandem {
namespace {

// What every row of a verification shares, along the path of accepted tokens:
// the repetition penalty's context, the constraint's state, the log-probability
// reports.
class PathState {
 public:
  PathState(int n_vocab, const SamplingParams& params, const std::vector<int>& context,
            const VerifyExtras& extras)
      : n_vocab_(n_vocab), params_(params), extras_(extras) {
    // The repetition penalty of a row reads the last penalty_last_n tokens of the
    // context followed by the accepted drafts before it: only that window is
    // copied, and nothing without a penalty.
    if (params.repetition_penalty != 1.0f) {
      const size_t n = context.size();
      const size_t window =
          params.penalty_last_n < 0 ? n : std::min(n, size_t(params.penalty_last_n));
      ctx_.assign(context.end() - static_cast<std::ptrdiff_t>(window), context.end());
    }
    // The constraint's state before each row: forked, advanced through the drafts.
    if (extras.constraint) state_ = extras.constraint->fork();
    if (extras.logprobs) extras.logprobs->clear();
  }

  // The penalty and the mask, applied to the row of the next position.
  void prepare(float* row) const {
    apply_repetition_penalty(row, n_vocab_, ctx_.data(), static_cast<int>(ctx_.size()), params_);
    if (state_) check(state_->mask(row, n_vocab_), "the output constraint allows no token");
  }
  // The row emits `token`: report its log-probabilities if asked (p: the
  // request's distribution over the row; null for a greedy request).
  void report(const float* row, int token, const SamplingDistribution* p) const {
    if (extras_.logprobs && extras_.top_logprobs >= 0)
      extras_.logprobs->push_back(token_logprobs(token, row, n_vocab_, p, extras_.top_logprobs));
  }
  // A drafted token was accepted: the next row follows it.
  void advance(int token) {
    if (params_.repetition_penalty != 1.0f) ctx_.push_back(token);
    if (state_) state_->advance(token);
  }

 private:
  int n_vocab_;
  const SamplingParams& params_;
  const VerifyExtras& extras_;
  std::vector<int> ctx_;
  std::unique_ptr<TokenConstraint> state_;
};

void normalize(std::vector<float>& w) {
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  if (sum > 0)
    for (float& x : w) x = static_cast<float>(x / sum);
}

bool any_positive(const std::vector<float>& w) {
  return std::any_of(w.begin(), w.end(), [](float x) { return x > 0; });
}

// The children of each node of a tree; index 0 lists the root's (node j is 1 + j).
std::vector<std::vector<int>> children_of(const Draft& d) {
  const int n = static_cast<int>(d.tokens.size());
  check(static_cast<int>(d.parent.size()) == n, "draft tree: {} parents for {} tokens",
        d.parent.size(), n);
  std::vector<std::vector<int>> children(n + 1);
  for (int j = 0; j < n; ++j) {
    check(d.parent[j] >= -1 && d.parent[j] < j, "draft tree: node {} has parent {}", j,
          d.parent[j]);
    children[d.parent[j] + 1].push_back(j);
  }
  return children;
}

Verdict verify_tree(float* logits, int n_vocab, const Draft& d, const SamplingParams& params,
                    PathState& path_state, Rng& rng) {
  const auto children = children_of(d);
  Verdict v;
  SamplingDistribution p;
  int node = -1;  // the node reached: -1 the root
  for (;;) {
    float* row = logits + static_cast<size_t>(node + 1) * n_vocab;
    path_state.prepare(row);
    const std::vector<int>& kids = children[node + 1];
    int next = -1, token = -1;
    if (params.greedy()) {
      token = argmax(row, n_vocab);
      for (int c : kids)
        if (d.tokens[c] == token) next = c;
      path_state.report(row, token, nullptr);
    } else {
      p.compute(row, n_vocab, params);
      std::vector<int> candidates;
      for (int c : kids) candidates.push_back(d.tokens[c]);
      const SamplingDistribution* q =
          kids.empty() || d.q.empty() ? nullptr : &d.q[static_cast<size_t>(kids[0])];
      const int picked = kids.empty() ? -1 : accept_among(p, q, candidates, rng, &token);
      if (kids.empty()) token = p.sample(rng);
      if (picked >= 0) {
        next = kids[picked];
        token = d.tokens[next];
      }
      path_state.report(row, token, &p);
    }
    if (next < 0) {
      v.n_accepted = static_cast<int>(v.path.size());
      v.token = token;
      return v;
    }
    v.path.push_back(next);
    path_state.advance(token);
    node = next;
  }
}

}  // namespace

bool accept_or_resample(const SamplingDistribution& p, const SamplingDistribution* q, int token,
                        Rng& rng, int* correction) {
  const double pt = p[token];
  const double qt = q ? (*q)[token] : 1.0;
  // u < p/q accepts with probability min(1, p/q); qt > 0 because token was drawn from q.
  if (qt > 0 && rng.uniform() * qt < pt) return true;
  std::vector<float> residual(p.probs());
  if (q) {
    for (size_t i = 0; i < residual.size(); ++i)
      residual[i] = std::max(0.0f, residual[i] - q->probs()[i]);
  } else {
    residual[token] = 0.0f;
  }
  // p <= q everywhere can only happen through float rounding (both sum to 1):
  // then p itself is the right distribution to draw from.
  *correction = any_positive(residual) ? sample_weights(residual, rng) : p.sample(rng);
  return false;
}

int accept_among(const SamplingDistribution& p, const SamplingDistribution* q1,
                 const std::vector<int>& children, Rng& rng, int* token) {
  std::vector<float> pj(p.probs()), qj;
  if (q1) qj = q1->probs();
  for (size_t j = 0; j < children.size(); ++j) {
    const int c = children[j];
    const double pc = pj[c], qc = q1 ? qj[c] : 1.0;
    if (qc > 0 && rng.uniform() * qc < pc) return static_cast<int>(j);
    // An empty residual only comes of float rounding (p_j <= q_j everywhere):
    // p_j itself is then the right distribution to go on with.
    if (q1) {
      bool any = false;
      for (size_t i = 0; i < pj.size() && !any; ++i) any = pj[i] > qj[i];
      if (any)
        for (size_t i = 0; i < pj.size(); ++i) pj[i] = std::max(0.0f, pj[i] - qj[i]);
      qj[c] = 0.0f;
      normalize(qj);
    } else {
      const float pc_was = pj[c];
      pj[c] = 0.0f;
      if (!any_positive(pj)) pj[c] = pc_was;
    }
    normalize(pj);
  }
  *token = sample_weights(pj, rng);
  return -1;
}

Verdict verify_draft(float* logits, int n_vocab, const Draft& draft, const SamplingParams& params,
                     const std::vector<int>& context, Rng& rng, const VerifyExtras& extras) {
  PathState path(n_vocab, params, context, extras);
  if (draft.is_tree()) return verify_tree(logits, n_vocab, draft, params, path, rng);
  const int k = static_cast<int>(draft.tokens.size());
  SamplingDistribution p;
  for (int i = 0; i <= k; ++i) {
    float* row = logits + static_cast<size_t>(i) * n_vocab;
    path.prepare(row);
    if (params.greedy()) {
      const int best = argmax(row, n_vocab);
      const bool last = i == k || best != draft.tokens[i];
      path.report(row, last ? best : draft.tokens[i], nullptr);
      if (last) return {i, best, {}};
    } else {
      p.compute(row, n_vocab, params);
      if (i == k) {
        const int t = p.sample(rng);
        path.report(row, t, &p);
        return {k, t, {}};
      }
      const SamplingDistribution* q = draft.q.empty() ? nullptr : &draft.q[i];
      int correction = -1;
      const bool accepted = accept_or_resample(p, q, draft.tokens[i], rng, &correction);
      path.report(row, accepted ? draft.tokens[i] : correction, &p);
      if (!accepted) return {i, correction, {}};
    }
    path.advance(draft.tokens[i]);
  }
  return {k, -1, {}};  // unreachable: the loop returns at i == k
}

}  // namespace tandem
