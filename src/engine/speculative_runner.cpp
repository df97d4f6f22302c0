#include "engine/speculative_runner.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "spec/verifier.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

SpeculativeRunner::SpeculativeRunner(Transformer& target, KVCache& cache, Drafter* drafter,
                                     SpecOptions opt)
    : target_(target), cache_(cache), drafter_(drafter), opt_(opt) {
  check(opt_.k >= 1, "draft length K must be >= 1, got {}", opt_.k);
  check(opt_.k <= kMaxDraft, "draft length K must be <= {}, got {}", kMaxDraft, opt_.k);
  if (drafter_) costs_.set_draft_prior(drafter_->relative_cost());
}

double SpeculativeRunner::catch_up_ms(const Sequence& seq) const {
  const double measured = drafter_->catch_up_ms(seq);
  return measured > 0 ? measured : costs_.draft_catch_up_prior_ms(drafter_->catch_up_tokens(seq));
}

int SpeculativeRunner::sample_next(Sequence& seq, float* logits) {
  const int V = target_.vocab_size();
  const auto& sp = seq.params().sampling;
  const auto& toks = seq.tokens();
  apply_repetition_penalty(logits, V, toks.data(), static_cast<int>(toks.size()), sp);
  if (sp.greedy()) return argmax(logits, V);
  SamplingDistribution p;
  p.compute(logits, V, sp);
  return p.sample(seq.rng());
}

void SpeculativeRunner::prefill(const std::vector<std::pair<Sequence*, int>>& chunks) {
  batch_.clear();
  std::vector<Sequence*> completed;
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
  const double ms = ms_between(t0, Clock::now());
  // Long chunks are compute-bound: their cost per position bounds what each
  // further verified position costs (adaptive K's extrapolation).
  constexpr int kPrefillSample = 32;
  if (fed >= kPrefillSample) costs_.record_prefill(fed, ms);
  for (auto [s, n] : chunks) s->stats().prefill_ms += ms;
  for (size_t i = 0; i < completed.size(); ++i)
    completed[i]->accept(sample_next(*completed[i], &logits_[i * V]));
}

int SpeculativeRunner::draft_cap(const Sequence& seq) const {
  if (!drafter_ || !seq.params().speculate) return 0;
  const int len = static_cast<int>(seq.tokens().size());
  const int k = std::min({opt_.k, seq.remaining() - 1, cache_.capacity(seq.target_slot) - len});
  return std::max(k, 0);
}

std::vector<int> SpeculativeRunner::plan(const std::vector<Sequence*>& seqs) {
  std::vector<int> k(seqs.size(), 0);
  if (!drafter_) return k;
  std::vector<DraftCandidate> batch;
  for (const Sequence* s : seqs) {
    const int pending = static_cast<int>(s->tokens().size()) - cache_.length(s->target_slot);
    double alpha = s->acceptance.alpha();
    if (s->acceptance.judged() < kMinJudged) alpha = std::max(alpha, kProbeAlpha);
    batch.push_back({alpha, pending, draft_cap(*s), catch_up_ms(*s), s->remaining()});
  }
  // Fixed K without opting out; or free proposals, trimmed after the lookup
  // (step() does that): the caps themselves.
  if ((!opt_.adaptive && !opt_.opt_out) || drafter_->free_proposals()) {
    for (size_t i = 0; i < seqs.size(); ++i) k[i] = batch[i].cap;
    return k;
  }
  // Costs are learned from the rounds themselves: first a plain round of this
  // batch; then, if drafting may pay, one drafting round to measure a draft
  // step and a verify pass (one request drafting a few tokens: four requests
  // drafting 12 each once verified 52 positions of the Qwen 1.5B, 600 ms, ten
  // decode steps), then let the measurements decide. "May pay" is judged with
  // the drafter's prior for its step and catch-up, and verify passes of more
  // positions taken as no dearer than the measured one: the prefill-rate floor
  // prices them at their costliest (Qwen 1.5B: 4 positions at 1.43x a decode
  // step, measured 1.13x), which under a sanitizer's slow prefill ruled out
  // drafting for a single request that gains 1.7x by it.
  int pending = 0;
  for (const auto& c : batch) pending += c.pending;
  if (!costs_.has_verify(pending)) return k;
  if (costs_.verify_points() < 2 || !costs_.has_draft_step()) {
    k = choose_draft_lengths(batch, k_choices(), costs_, CostModel::Reading::Hopeful);
    bool first = true;
    for (size_t i = 0; i < seqs.size(); ++i)
      if (k[i] > 0) {
        k[i] = first ? std::min(batch[i].cap, kExploreDraft) : 0;
        first = false;
      }
    return k;
  }
  k = choose_draft_lengths(batch, k_choices(), costs_);
  // Drafting step by step, a request may draft up to its cap: the early stop
  // (draft_stop) ends each draft where it stops paying.
  if (stops_early())
    for (size_t i = 0; i < seqs.size(); ++i)
      if (k[i] > 0) k[i] = batch[i].cap;
  add_probes(seqs, batch, k);
  return k;
}

std::unique_ptr<CostAwareStop> SpeculativeRunner::draft_stop(const std::vector<Sequence*>& seqs,
                                                             const std::vector<int>& k) const {
  if (!stops_early() || recent_ms_ <= 0 || costs_.verify_points() < 2) return nullptr;
  std::vector<double> next_alpha;
  int positions = 0, drafting = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& s = *seqs[i];
    next_alpha.push_back(s.acceptance.alpha());
    positions += static_cast<int>(s.tokens().size()) - cache_.length(s.target_slot);
    drafting += k[i] > 0;
  }
  return std::make_unique<CostAwareStop>(calibration_, costs_, std::move(next_alpha), positions,
                                         drafting, recent_tokens_ / recent_ms_);
}

void SpeculativeRunner::add_probes(const std::vector<Sequence*>& seqs,
                                   const std::vector<DraftCandidate>& batch,
                                   std::vector<int>& k) {
  // Without a probe now and then the estimate could never recover when the
  // text turns predictable; one token is the cheapest trial. One probe a round,
  // the most overdue: requests admitted together come due together, and each
  // judged alone as worth a probe, five of sixteen probed in one round (SmolLM2
  // serving at concurrency 16: 21 positions verified, 14 -> 18 ms, for about
  // one token).
  int probe = -1, most_overdue = -1;  // rounds past its wait (negative: not due)
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    if (k[i] > 0) {
      s.failed_probes = 0;  // drafting pays (again)
      continue;
    }
    const int overdue =
        s.rounds_since_draft - (kProbeEvery << std::min(s.failed_probes, kMaxProbeBackoff));
    if (overdue <= most_overdue || batch[i].cap <= 0) continue;
    probe = static_cast<int>(i);
    most_overdue = overdue;
  }
  if (probe < 0) return;
  auto hopeful = batch;
  hopeful[probe].alpha = std::max(hopeful[probe].alpha, kProbeAlpha);
  if (choose_draft_lengths(hopeful, k_choices(), costs_)[probe] == 0) return;
  seqs[probe]->failed_probes++;
  k[probe] = 1;
}

std::vector<int> SpeculativeRunner::k_choices() const {
  std::vector<int> choices;
  if (opt_.adaptive) {
    for (int c = 1; c <= opt_.k; ++c) choices.push_back(c);
  } else {
    choices.push_back(opt_.k);
  }
  return choices;
}

void SpeculativeRunner::trim_free_drafts(const std::vector<Sequence*>& seqs) {
  if ((!opt_.adaptive && !opt_.opt_out) || costs_.verify_points() < 2) return;
  std::vector<DraftCandidate> batch;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Sequence& s = *seqs[i];
    const Draft& d = drafts_[i];
    const int pending = static_cast<int>(s.tokens().size()) - cache_.length(s.target_slot);
    batch.push_back({d.alpha >= 0 ? d.alpha : s.acceptance.alpha(), pending,
                     static_cast<int>(d.tokens.size())});
  }
  auto keep = choose_draft_lengths(batch, k_choices(), costs_);
  add_probes(seqs, batch, keep);
  for (size_t i = 0; i < seqs.size(); ++i) drafts_[i].tokens.resize(keep[i]);
}

void SpeculativeRunner::step(const std::vector<Sequence*>& seqs, const std::vector<int>& k) {
  if (seqs.empty()) return;
  const auto t0 = Clock::now();

  // 1-2. Draft.
  bool any_draft = false;
  for (int ki : k) any_draft |= ki > 0;
  drafts_.resize(seqs.size());
  for (auto& d : drafts_) d.clear();
  const auto stop = any_draft ? draft_stop(seqs, k) : nullptr;
  const double step_ms = any_draft ? drafter_->propose(seqs, k, drafts_, stop.get()) : -1;
  if (any_draft && drafter_->free_proposals()) trim_free_drafts(seqs);
  if (stop) stop->trim(drafts_);
  const auto t1 = Clock::now();

  // 3. One target forward: pending tokens plus drafts for every sequence.
  batch_.clear();
  std::vector<int> first_row(seqs.size());
  int rows = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    const auto& toks = s.tokens();
    const int have = cache_.length(s.target_slot);
    check(have < static_cast<int>(toks.size()), "sequence {} has no pending token", s.id());
    const int pending = static_cast<int>(toks.size()) - have;
    batch_.add_sequence(s.target_slot, toks.data() + have, pending, have, false, true);
    const auto& d = drafts_[i].tokens;
    batch_.add_sequence(s.target_slot, d.data(), static_cast<int>(d.size()), have + pending, true,
                        false);
    first_row[i] = rows;
    rows += 1 + static_cast<int>(d.size());
  }
  const int V = target_.vocab_size();
  resize_scratch(logits_, static_cast<size_t>(rows) * V);
  // The verify pass is timed alone: its cost per position count is what the
  // adaptive K weighs drafts against.
  const auto t_verify = Clock::now();
  target_.forward(batch_, cache_, logits_.data());
  const auto t2 = Clock::now();
  const double draft_ms = ms_between(t0, t1), verify_ms = ms_between(t_verify, t2);
  costs_.record_verify(batch_.size(), verify_ms);
  int drafting = 0;
  for (int ki : k) drafting += ki > 0;
  if (step_ms >= 0) costs_.record_draft_step(drafting, step_ms);

  // 4-5. Accept, emit, roll back.
  int emitted = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    const Draft& d = drafts_[i];
    const int n_draft = static_cast<int>(d.tokens.size());
    const int base = static_cast<int>(s.tokens().size());  // cache holds all of these now
    Verdict v = verify_draft(&logits_[static_cast<size_t>(first_row[i]) * V], V, d,
                             s.params().sampling, s.tokens(), s.rng());
    auto& st = s.stats();
    st.rounds++;
    if (n_draft > 0) {
      st.spec_rounds++;
      st.drafted += n_draft;
      st.accepted += v.n_accepted;
      st.rejections += v.n_accepted < n_draft;
      st.spec_verify_ms += verify_ms;
      s.acceptance.update(v.n_accepted, v.n_accepted < n_draft);
      calibration_.record(d, v.n_accepted);
      s.rounds_since_draft = 0;
    } else {
      s.rounds_since_draft++;
    }
    bool open = true;
    for (int j = 0; j < v.n_accepted && open; ++j) open = s.accept(d.tokens[j]);
    if (open) s.accept(v.token);
    emitted += v.n_accepted + 1;
    // The cache keeps the pending tokens and the accepted drafts; the new last
    // token (correction or bonus) is fed next round.
    cache_.truncate_to(s.target_slot, base + v.n_accepted);
    if (drafter_) drafter_->sync(s, d, v.n_accepted);
    st.draft_ms += draft_ms;
    st.verify_ms += verify_ms;
  }
  const double total_ms = ms_between(t0, Clock::now());
  for (Sequence* s : seqs) s->stats().decode_ms += total_ms;
  constexpr double kRecent = 0.9;  // a window of about ten rounds
  recent_tokens_ = kRecent * recent_tokens_ + emitted;
  recent_ms_ = kRecent * recent_ms_ + total_ms;
}

void SpeculativeRunner::release(const Sequence& seq) {
  if (drafter_) drafter_->release(seq);
}

}  // namespace tandem
