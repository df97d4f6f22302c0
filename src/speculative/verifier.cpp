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
  // Whether log-probabilities are asked for.
  bool wants_report() const { return extras_.logprobs && extras_.top_logprobs >= 0; }
  // The row emits `token`: report its log-probabilities if asked (p: the
  // request's distribution over the row; null for a greedy request).
  void report(const float* row, int token, const SamplingDistribution* p) const {
    if (wants_report())
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

// Whether the target's token at a row is a function of the row alone (greedy,
// or reproducible sampling): drafts are then accepted by equality.
bool deterministic(const SamplingParams& params) {
  return params.greedy() || params.mode == SamplingMode::Reproducible;
}

// What one verification works with: the request's parameters, the path state,
// and the scratch.
struct Rows {
  int n_vocab;
  const SamplingParams& params;
  PathState& path;
  VerifyScratch& scratch;
  int64_t base;  // the position row 0 chooses

  // The target's token at a row that chooses position `position` (deterministic
  // modes), reported with its log-probabilities when asked.
  int own_token(float* row, int64_t position) {
    if (params.greedy()) {
      const int t = argmax(row, n_vocab);
      path.report(row, t, nullptr);
      return t;
    }
    const int t = scratch.gumbel.choose(row, n_vocab, params, position);
    if (path.wants_report()) {
      scratch.p.compute(row, n_vocab, params);
      path.report(row, t, &scratch.p);
    }
    return t;
  }
};

// The children of each node of a tree, in index order, as lists in the
// scratch: node j's (j = -1: the root's) are child_list[child_start[j + 1] ..
// child_start[j + 2]).
class Children {
 public:
  Children(const Draft& d, VerifyScratch& scratch)
      : start_(scratch.child_start), list_(scratch.child_list) {
    const int n = static_cast<int>(d.tokens.size());
    check(static_cast<int>(d.parent.size()) == n, "draft tree: {} parents for {} tokens",
          d.parent.size(), n);
    start_.assign(static_cast<size_t>(n) + 2, 0);
    for (int j = 0; j < n; ++j) {
      check(d.parent[j] >= -1 && d.parent[j] < j, "draft tree: node {} has parent {}", j,
            d.parent[j]);
      ++start_[d.parent[j] + 2];
    }
    for (int i = 1; i < n + 2; ++i) start_[i] += start_[i - 1];
    list_.resize(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) list_[start_[d.parent[j] + 1]++] = j;
    // Each start moved to the end of its list: shift back by one list.
    for (int i = n + 1; i > 0; --i) start_[i] = start_[i - 1];
    start_[0] = 0;
  }
  std::span<const int> of(int node) const {
    return {list_.data() + start_[node + 1],
            static_cast<size_t>(start_[node + 2] - start_[node + 1])};
  }

 private:
  std::vector<int>& start_;
  std::vector<int>& list_;
};

void verify_tree(float* logits, const Draft& d, Rows& rows, Rng& rng, Verdict& v) {
  const Children children(d, rows.scratch);
  const int n_vocab = rows.n_vocab;
  int node = -1;  // the node reached: -1 the root
  for (;;) {
    float* row = logits + static_cast<size_t>(node + 1) * n_vocab;
    rows.path.prepare(row);
    const std::span<const int> kids = children.of(node);
    int next = -1, token = -1;
    if (deterministic(rows.params)) {
      token = rows.own_token(row, rows.base + static_cast<int64_t>(v.path.size()));
      for (int c : kids)
        if (d.tokens[c] == token) next = c;
    } else {
      SamplingDistribution& p = rows.scratch.p;
      p.compute(row, n_vocab, rows.params);
      std::vector<int>& candidates = rows.scratch.candidates;
      candidates.clear();
      for (int c : kids) candidates.push_back(d.tokens[c]);
      const SamplingDistribution* q =
          kids.empty() || d.q.empty() ? nullptr : &d.q[static_cast<size_t>(kids[0])];
      const int picked =
          kids.empty() ? -1 : accept_among(p, q, candidates, rng, &token, &rows.scratch);
      if (kids.empty()) token = p.sample(rng);
      if (picked >= 0) {
        next = kids[picked];
        token = d.tokens[next];
      }
      rows.path.report(row, token, &p);
    }
    if (next < 0) {
      v.n_accepted = static_cast<int>(v.path.size());
      v.token = token;
      return;
    }
    v.path.push_back(next);
    rows.path.advance(token);
    node = next;
  }
}

}  // namespace

bool accept_or_resample(const SamplingDistribution& p, const SamplingDistribution* q, int token,
                        Rng& rng, int* correction, VerifyScratch* scratch) {
  const double pt = p[token];
  const double qt = q ? (*q)[token] : 1.0;
  // u < p/q accepts with probability min(1, p/q); qt > 0 because token was drawn from q.
  if (qt > 0 && rng.uniform() * qt < pt) return true;
  std::vector<float> local;
  std::vector<float>& residual = scratch ? scratch->residual : local;
  residual.assign(p.probs().begin(), p.probs().end());
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
                 const std::vector<int>& children, Rng& rng, int* token, VerifyScratch* scratch) {
  std::vector<float> local_p, local_q;
  std::vector<float>& pj = scratch ? scratch->residual : local_p;
  std::vector<float>& qj = scratch ? scratch->q_rest : local_q;
  pj.assign(p.probs().begin(), p.probs().end());
  if (q1) qj.assign(q1->probs().begin(), q1->probs().end());
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

void verify_draft(float* logits, int n_vocab, const Draft& draft, const SamplingParams& params,
                  const std::vector<int>& context, Rng& rng, const VerifyExtras& extras,
                  VerifyScratch& scratch, Verdict& v) {
  v.path.clear();
  PathState path(n_vocab, params, context, extras);
  Rows rows{n_vocab, params, path, scratch, static_cast<int64_t>(context.size())};
  if (draft.is_tree()) return verify_tree(logits, draft, rows, rng, v);
  const int k = static_cast<int>(draft.tokens.size());
  SamplingDistribution& p = scratch.p;
  auto verdict = [&](int accepted, int token) {
    v.n_accepted = accepted;
    v.token = token;
  };
  for (int i = 0; i <= k; ++i) {
    float* row = logits + static_cast<size_t>(i) * n_vocab;
    path.prepare(row);
    if (deterministic(params)) {
      const int own = rows.own_token(row, rows.base + i);
      if (i == k || own != draft.tokens[i]) return verdict(i, own);
    } else {
      p.compute(row, n_vocab, params);
      if (i == k) {
        const int t = p.sample(rng);
        path.report(row, t, &p);
        return verdict(k, t);
      }
      const SamplingDistribution* q = draft.q.empty() ? nullptr : &draft.q[i];
      int correction = -1;
      const bool accepted = accept_or_resample(p, q, draft.tokens[i], rng, &correction, &scratch);
      path.report(row, accepted ? draft.tokens[i] : correction, &p);
      if (!accepted) return verdict(i, correction);
    }
    path.advance(draft.tokens[i]);
  }
}

Verdict verify_draft(float* logits, int n_vocab, const Draft& draft, const SamplingParams& params,
                     const std::vector<int>& context, Rng& rng, const VerifyExtras& extras) {
  VerifyScratch scratch;
  Verdict v;
  verify_draft(logits, n_vocab, draft, params, context, rng, extras, scratch, v);
  return v;
}

}  // namespace tandem
