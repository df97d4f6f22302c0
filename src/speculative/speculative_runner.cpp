#include "speculative/speculative_runner.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "speculative/verifier.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

SpeculativeRunner::SpeculativeRunner(ForwardPass& target, KVCache& cache, Drafter* drafter,
                                     SpecOptions opt, DraftPolicyTuning tuning)
    : target_(target), cache_(cache), drafter_(drafter), policy_(drafter, opt, tuning) {
  // A pass's positions, reserved for the longest pass (its logits grow to the
  // longest pass met: resize_scratch).
  batch_.reserve(target.max_tokens());
  // A verdict's path and a tree's children: no longer than a draft.
  const size_t nodes = kMaxDraft + static_cast<size_t>(opt.tree_extra) + 2;
  verdict_.path.reserve(nodes);
  verify_scratch_.child_start.reserve(nodes + 2);
  verify_scratch_.child_list.reserve(nodes);
  verify_scratch_.candidates.reserve(nodes);
  // The verifier's distributions and residuals: a vocabulary each.
  const int V = target.vocab_size();
  verify_scratch_.p.reserve(V);
  verify_scratch_.gumbel.reserve(V);
  verify_scratch_.residual.reserve(static_cast<size_t>(V));
  verify_scratch_.q_rest.reserve(static_cast<size_t>(V));
}

VerifyExtras SpeculativeRunner::extras(const Generation& seq) {
  return {seq.constraint(), seq.top_logprobs(), &logprobs_};
}

void SpeculativeRunner::prefill(const std::vector<std::pair<Generation*, int>>& chunks) {
  batch_.clear();
  std::vector<Generation*> completed;
  int fed = 0;
  for (auto [s, n] : chunks) {
    const int have = cache_.length(s->target_slot);
    check(n > 0 && have + n <= s->prefill_end(), "prefill: sequence {} cannot take {} tokens",
          s->id(), n);
    // Only a new request samples at the end of its prefill; a recomputed one
    // (after preemption) already has its next token.
    const bool sample = have + n == s->prefill_end() && s->n_generated() == 0;
    batch_.add_sequence(s->target_slot, s->tokens().data() + have, n, have, false, sample);
    if (sample) completed.push_back(s);
    fed += n;
  }
  if (fed == 0) return;
  const int V = target_.vocab_size();
  resize_scratch(logits_, completed.size() * size_t(V));
  const auto t0 = Clock::now();
  target_.forward(batch_, cache_, logits_.data());
  const double ms = ms_since(t0);
  policy_.record_prefill(fed, ms);
  for (auto [s, n] : chunks) s->stats().prefill_ms += ms;
  // A new request's first token: a verification of an empty draft.
  for (size_t i = 0; i < completed.size(); ++i) {
    Generation& s = *completed[i];
    verify_draft(&logits_[i * V], V, no_draft_, s.sampling(), s.tokens(), s.rng(), extras(s),
                 verify_scratch_, verdict_);
    s.accept({verdict_.token, false, logprobs_.empty() ? nullptr : &logprobs_[0]});
  }
}

void SpeculativeRunner::describe(const std::vector<Generation*>& seqs,
                                 std::vector<RoundRequest>& round) const {
  round.clear();
  for (Generation* s : seqs) {
    const int len = static_cast<int>(s->tokens().size());
    // A round emits up to K + 1 tokens and writes K + 1 cache positions.
    const int room = std::min(s->remaining() - 1, cache_.capacity(s->target_slot) - len);
    const int kv_room = cache_.capacity(s->target_slot) - len;
    round.push_back({s->draft_context(), len - cache_.length(s->target_slot),
                     s->speculate() ? std::max(room, 0) : 0, s->remaining(),
                     s->speculate() ? std::max(kv_room, 0) : 0});
  }
}

void SpeculativeRunner::plan(const std::vector<Generation*>& seqs, const KvBudget& budget,
                             RoundPlan& out) {
  describe(seqs, out.requests);
  policy_.plan(out, &budget);
}

void SpeculativeRunner::step(const std::vector<Generation*>& seqs, const RoundPlan& plan) {
  if (seqs.empty()) return;
  const auto t0 = Clock::now();
  const double step_ms = draft(plan);
  const double draft_ms = ms_since(t0);
  const double verify_ms = verify(seqs, plan);
  const int V = target_.vocab_size();
  int emitted = 0, drafted_tokens = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Generation& s = *seqs[i];
    const int before = s.n_generated();
    const Verdict& v = accept(s, drafts_[i], &logits_[size_t(first_row_[i]) * V]);
    const Draft& d = drafts_[i];
    const int drafted = d.depth();
    // The accepted drafts come first: those the output took (all of them
    // unless the request ended inside the round).
    const int kept = std::min(v.n_accepted, s.n_generated() - before);
    const bool off_chain = d.is_tree() && !v.path.empty() && v.path.back() >= d.chain_length();
    s.stats().add_round(drafted, kept, v.n_accepted < drafted, draft_ms, verify_ms,
                        static_cast<int>(d.tokens.size()) - d.chain_length(), off_chain);
    emitted += v.n_accepted + 1;
    drafted_tokens += static_cast<int>(d.tokens.size());
  }
  const double total_ms = ms_since(t0);
  for (Generation* s : seqs) s->stats().decode_ms += total_ms;
  const int drafting =
      static_cast<int>(std::count_if(plan.k.begin(), plan.k.end(), [](int x) { return x > 0; }));
  policy_.record_round({batch_.size(), verify_ms, drafting, step_ms, emitted, total_ms,
                        plan.guard_load(), drafted_tokens, static_cast<int>(seqs.size())});
}

double SpeculativeRunner::draft(const RoundPlan& plan) {
  drafts_.resize(plan.requests.size());
  for (auto& d : drafts_) {
    d.clear();
    d.reserve(kMaxDraft + policy_.options().tree_extra);
  }
  if (!plan.drafts()) return -1;
  const CostAwareStop* stop = policy_.draft_stop(plan);
  contexts_.clear();
  for (const RoundRequest& r : plan.requests) contexts_.push_back(r.ctx);
  const double step_ms = drafter_->propose(contexts_, plan.k, drafts_, stop);
  policy_.trim(plan, drafts_, stop);
  return step_ms;
}

double SpeculativeRunner::verify(const std::vector<Generation*>& seqs, const RoundPlan& plan) {
  batch_.clear();
  first_row_.resize(seqs.size());
  int rows = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Generation& s = *seqs[i];
    const auto& toks = s.tokens();
    const int have = cache_.length(s.target_slot);
    check(have < static_cast<int>(toks.size()), "sequence {} has no pending token", s.id());
    const int pending = static_cast<int>(toks.size()) - have;
    batch_.add_sequence(s.target_slot, toks.data() + have, pending, have, false, true);
    const Draft& d = drafts_[i];
    const int n = static_cast<int>(d.tokens.size());
    if (d.is_tree())
      batch_.add_tree(s.target_slot, d.tokens.data(), d.parent.data(), n, have + pending, true);
    else
      batch_.add_sequence(s.target_slot, d.tokens.data(), n, have + pending, true, false);
    first_row_[i] = rows;
    rows += 1 + n;
  }
  // Room for the most rows the plan allows, so that the buffer grows when plans
  // do rather than with every longer draft.
  size_t bound = 0;
  for (size_t i = 0; i < plan.requests.size(); ++i)
    bound += static_cast<size_t>(plan.requests[i].pending + plan.positions[i]);
  const size_t V = static_cast<size_t>(target_.vocab_size());
  if (logits_.capacity() < bound * V) resize_scratch(logits_, bound * V);
  resize_scratch(logits_, static_cast<size_t>(rows) * V);
  // Timed alone, without the buffer growth: its cost per position count is what
  // the policy weighs drafts against.
  const auto t0 = Clock::now();
  target_.forward(batch_, cache_, logits_.data());
  return ms_since(t0);
}

const Verdict& SpeculativeRunner::accept(Generation& s, const Draft& d, float* logits) {
  const int base = static_cast<int>(s.tokens().size());  // the cache holds all of these now
  verify_draft(logits, target_.vocab_size(), d, s.sampling(), s.tokens(), s.rng(), extras(s),
               verify_scratch_, verdict_);
  const Verdict& v = verdict_;
  // The policy and the drafter learn from the main chain: what its acceptance
  // estimates and confidences are about.
  int on_chain = v.n_accepted;
  if (d.is_tree()) {
    on_chain = 0;
    while (on_chain < v.n_accepted && v.path[on_chain] == on_chain) ++on_chain;
  }
  policy_.record_verdict(s.id(), d, on_chain);
  if (d.is_tree())
    policy_.record_tree(static_cast<int>(d.tokens.size()) - d.chain_length(),
                        v.n_accepted - on_chain);
  auto logprobs = [&](int j) { return logprobs_.empty() ? nullptr : &logprobs_[j]; };
  bool open = true;
  for (int j = 0; j < v.n_accepted && open; ++j) {
    const int node = d.is_tree() ? v.path[j] : j;
    open = s.accept({d.tokens[node], true, logprobs(j)});
  }
  if (open) s.accept({v.token, false, logprobs(v.n_accepted)});
  roll_back(s, d, v, base);
  if (drafter_) drafter_->sync(s.draft_context(), d, on_chain);
  return v;
}

void SpeculativeRunner::roll_back(const Generation& s, const Draft& d, const Verdict& v, int base) {
  // A tree's node j sits at base + j: the accepted path's nodes move to base,
  // base + 1, ... in order (node indices grow along a path, so no move
  // overwrites a node still to be moved).
  if (d.is_tree())
    for (int j = 0; j < v.n_accepted; ++j)
      if (v.path[j] != j) cache_.move(s.target_slot, base + v.path[j], base + j);
  // The cache keeps the pending tokens and the accepted drafts; the new last
  // token (correction or bonus) is fed next round.
  cache_.truncate_to(s.target_slot, base + v.n_accepted);
}

void SpeculativeRunner::release(Generation& seq) {
  if (drafter_) drafter_->release(seq.id());
}

void SpeculativeRunner::finish(Generation& seq) {
  if (drafter_) drafter_->finished(seq.draft_context());
  release(seq);
  policy_.forget(seq.id());
}

}  // namespace tandem
