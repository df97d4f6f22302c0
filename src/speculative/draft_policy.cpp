#include "speculative/draft_policy.h"

#include <algorithm>

#include "core/error.h"
#include "speculative/draft_hints.h"

namespace tandem {

DraftPolicy::DraftPolicy(const Drafter* drafter, SpecOptions opt, DraftPolicyTuning tuning)
    : drafter_(drafter),
      hints_(drafter ? drafter->cost_hints() : nullptr),
      opt_(opt),
      tuning_(tuning),
      guard_(tuning.rate_guard),
      speed_shift_(tuning.speed_shift),
      pooled_(tuning.acceptance_fade),
      reach_(tuning.reach_fade),
      stop_(calibration_, costs_, {}, 0, 1, 0) {
  check(opt_.k >= 1, "draft length K must be >= 1, got {}", opt_.k);
  check(opt_.k <= kMaxDraft, "draft length K must be <= {}, got {}", kMaxDraft, opt_.k);
  if (hints_) costs_.set_draft_prior(hints_->relative_cost());
  if (opt_.adaptive)
    for (int c = 1; c <= opt_.k; ++c) k_choices_.push_back(c);
  else
    k_choices_.push_back(opt_.k);
  // Scratch for batches of up to this many requests, made now: planning and
  // trimming allocate nothing round after round (a larger batch grows it once).
  constexpr size_t kBatch = 64;
  for (auto* v : {&batch_, &hopeful_}) v->reserve(kBatch);
  for (auto* v : {&order_, &probe_k_, &keep_, &extra_, &room_}) v->reserve(kBatch);
  next_alpha_.reserve(kBatch);
}

DraftPolicy::RequestState& DraftPolicy::state(int id) {
  return requests_.try_emplace(id, RequestState{AcceptanceEstimate(tuning_.acceptance_fade)})
      .first->second;
}

double DraftPolicy::acceptance(int id) const {
  auto it = requests_.find(id);
  return it != requests_.end() ? it->second.acceptance.alpha()
                               : AcceptanceEstimate(tuning_.acceptance_fade).alpha();
}

void DraftPolicy::forget(int id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  end_reach(it->second);  // finished: its drafting reached what it could
  requests_.erase(it);
}

double DraftPolicy::new_request_alpha() const {
  return pooled_.judged() >= tuning_.min_judged ? pooled_.alpha() : tuning_.probe_alpha;
}

int DraftPolicy::cap(const RoundRequest& r) const {
  return drafter_ ? std::max(0, std::min(opt_.k, r.room)) : 0;
}

void DraftPolicy::choose(std::span<const DraftCandidate> batch, CostModel::Reading reading,
                         double margin, std::vector<int>& out) {
  out.resize(batch.size());
  choose_draft_lengths(batch, k_choices_, costs_, reading, margin, out, order_);
}

bool DraftPolicy::stops_early() const {
  return opt_.adaptive && drafter_ && !drafter_->free_proposals();
}

double DraftPolicy::catch_up_ms(const DraftContext& ctx) const {
  if (!hints_) return 0;
  const double measured = hints_->catch_up_ms(ctx);
  return measured > 0 ? measured : costs_.draft_catch_up_prior_ms(hints_->catch_up_tokens(ctx));
}

void DraftPolicy::plan(RoundPlan& p, const KvBudget* budget) {
  const std::vector<RoundRequest>& round = p.requests;
  load_ = p.guard_load();
  // Born into a trial's steady drafting or not: see starts_up().
  for (const RoundRequest& r : round)
    if (!requests_.contains(r.ctx.id))
      state(r.ctx.id).born_in_trial = guard_.judged_rounds(load_) > 0 ? guard_.trial(load_) : 0;
  draft_lengths(round, p.k);
  bool refused = false;
  if (guarded() && p.drafts() && !guard_.allows(load_)) {
    std::fill(p.k.begin(), p.k.end(), 0);
    refused = true;
  }
  p.positions.resize(round.size());
  for (size_t i = 0; i < round.size(); ++i)
    p.positions[i] = position_budget(round[i].kv_room, p.k[i]);
  // Short of KV room: no drafts this round (the engine preempts only where
  // even a plain step does not fit).
  if (budget && p.drafts() && !budget->fits(p.positions, p.k)) {
    std::fill(p.k.begin(), p.k.end(), 0);
    std::fill(p.positions.begin(), p.positions.end(), 0);
    refused = true;
  }
  track_reaches(p, refused);
  start_up_ = starts_up(p);
}

void DraftPolicy::track_reaches(const RoundPlan& p, bool refused) {
  if (!hints_) return;  // no catch-up to price
  for (size_t i = 0; i < p.requests.size(); ++i) {
    RequestState& st = state(p.requests[i].ctx.id);
    const bool drafts = p.k[i] > 0;
    if (refused) st.reaching = false;
    const bool chosen = cost_model_chose_ && static_cast<int>(i) != probed_;
    if (drafts && !st.drafted_last && chosen) {
      st.reaching = true;
      st.reach_load = load_;
      st.reach_tokens = 0;
    } else if (!drafts) {
      end_reach(st);
    }
    st.drafted_last = drafts;
  }
}

void DraftPolicy::end_reach(RequestState& st) {
  if (!st.reaching) return;
  reach_.record(st.reach_load, st.reach_tokens);
  st.reaching = false;
}

bool DraftPolicy::starts_up(const RoundPlan& p) {
  // Free drafters (n-gram, suffix) keep no state that a trial must build.
  if (!guarded() || !p.drafts() || drafter_->free_proposals()) return false;
  const int trial = guard_.trial(load_);
  bool start_up = false;
  for (size_t i = 0; i < p.requests.size(); ++i) {
    if (p.k[i] <= 0) continue;
    RequestState& st = state(p.requests[i].ctx.id);
    // A request born in this trial's steady drafting catches up on its prompt:
    // what every new request costs while drafting goes on, so judged. One born
    // before the trial's first judged round (the trial margin kept it decoding
    // plain until then) catches up on all it decoded plainly: once per trial.
    start_up = start_up || (st.drafted_in_trial != trial && st.born_in_trial != trial);
    st.drafted_in_trial = trial;
  }
  return start_up;
}

RoundPlan DraftPolicy::plan(std::vector<RoundRequest> round, const KvBudget* budget) {
  RoundPlan p;
  p.requests = std::move(round);
  plan(p, budget);
  return p;
}

void DraftPolicy::draft_lengths(std::span<const RoundRequest> round, std::vector<int>& k) {
  k.assign(round.size(), 0);
  cost_model_chose_ = false;
  probed_ = -1;
  if (!drafter_) return;
  batch_.clear();
  // A round that decodes fewer requests than its load (the others' prompts
  // still prefilling) is one of a few before the batch is whole again. A draft
  // model's catch-up bought in it pays for that round's drafts only: where the
  // whole batch drafts, its rounds catch up anyway; where it does not, nothing
  // after the round uses the caught-up cache. So the round is charged the whole
  // catch-up, not a share spread over the request's remaining tokens; spread,
  // such rounds bought catch-ups that the whole batch then left unused
  // (docs/decisions.md, "A catch-up in a round short of its load").
  const bool short_of_load = this->short_of_load(round);
  for (const RoundRequest& r : round) {
    const RequestState& st = state(r.ctx.id);
    double alpha = st.acceptance.alpha();
    if (st.acceptance.judged() < tuning_.min_judged) alpha = std::max(alpha, new_request_alpha());
    const double spread = short_of_load ? 1 : reach_.spread(load_, r.remaining);
    batch_.push_back(
        {alpha, r.pending, cap(r), catch_up_ms(r.ctx), std::max(1, static_cast<int>(spread))});
  }
  // Fixed K without opting out; or free proposals, trimmed after the lookup
  // (trim() does that): the caps themselves.
  if ((!opt_.adaptive && !opt_.opt_out) || drafter_->free_proposals()) {
    for (size_t i = 0; i < round.size(); ++i) k[i] = batch_[i].cap;
    return;
  }
  // Costs are learned from the rounds themselves: first a plain round of this
  // batch; then, if drafting may pay, one round in which one request drafts a
  // few tokens, to measure a draft step and a verify pass; then the
  // measurements decide. "May pay" is read hopefully: the drafter's prior for
  // its step and catch-up, and verify passes of more positions no dearer than
  // the measured one (the floored reading prices a few extra positions at their
  // costliest, and a slow prefill, as under a sanitizer, would then rule out
  // drafting where it pays).
  int pending = 0;
  for (const auto& c : batch_) pending += c.pending;
  if (!costs_.has_verify(pending)) return;
  if (costs_.verify_points() < 2 || !costs_.has_draft_step()) {
    choose(batch_, CostModel::Reading::Hopeful, 0, k);
    bool first = true;
    for (size_t i = 0; i < round.size(); ++i)
      if (k[i] > 0) {
        k[i] = first ? std::min(batch_[i].cap, tuning_.explore_draft) : 0;
        first = false;
      }
    return;
  }
  choose(batch_, CostModel::Reading::Floored, margin(round), k);
  // Drafting step by step, a request may draft up to its cap: the early stop
  // (draft_stop) ends each draft where it stops paying.
  if (stops_early())
    for (size_t i = 0; i < round.size(); ++i)
      if (k[i] > 0) k[i] = batch_[i].cap;
  cost_model_chose_ = true;
  add_probes(round, batch_, k);
}

void DraftPolicy::add_probes(std::span<const RoundRequest> round,
                             const std::vector<DraftCandidate>& batch, std::vector<int>& k) {
  // Without a probe now and then the estimate could never recover when the
  // text turns predictable; one token is the cheapest trial. One probe a round,
  // the most overdue request's: requests admitted together come due together,
  // and each judged alone would be worth a probe.
  int probe = -1, most_overdue = -1;  // rounds past its wait (negative: not due)
  for (size_t i = 0; i < round.size(); ++i) {
    RequestState& st = state(round[i].ctx.id);
    if (k[i] > 0) {
      st.failed_probes = 0;  // drafting pays (again)
      continue;
    }
    const int wait = tuning_.probe_every << std::min(st.failed_probes, tuning_.max_probe_backoff);
    const int overdue = st.rounds_since_draft - wait;
    if (overdue <= most_overdue || batch[i].cap <= 0) continue;
    probe = static_cast<int>(i);
    most_overdue = overdue;
  }
  if (probe < 0) return;
  hopeful_.assign(batch.begin(), batch.end());
  hopeful_[probe].alpha = std::max(hopeful_[probe].alpha, tuning_.probe_alpha);
  // The hope is that the text turned predictable: the drafting a probe would
  // resume then lasts, unlike the drafting that stopped (CatchUpReach), and
  // the probe's catch-up is priced over what the request has left.
  if (!short_of_load(round)) hopeful_[probe].catch_up_spread = std::max(1, round[probe].remaining);
  choose(hopeful_, CostModel::Reading::Floored, margin(round), probe_k_);
  if (probe_k_[probe] == 0) return;
  const double cost = batch[probe].catch_up_ms + costs_.mean_position_ms();
  if (cost > probe_budget_ms_) return;  // not yet paid for: it stays due
  probe_budget_ms_ -= cost;
  state(round[probe].ctx.id).failed_probes++;
  k[probe] = 1;
  probed_ = probe;
}

const CostAwareStop* DraftPolicy::draft_stop(const RoundPlan& plan) {
  if (!stops_early() || recent_ms_ <= 0 || costs_.verify_points() < 2) return nullptr;
  next_alpha_.clear();
  int positions = 0, drafting = 0;
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    next_alpha_.push_back(state(plan.requests[i].ctx.id).acceptance.alpha());
    positions += plan.requests[i].pending;
    drafting += plan.k[i] > 0;
  }
  stop_.reset(next_alpha_, positions, drafting, recent_tokens_ / recent_ms_);
  return &stop_;
}

bool DraftPolicy::explored(int batch) const {
  if (!drafter_) return true;
  return costs_.has_verify(batch) && costs_.verify_points() >= 2 && costs_.has_draft_step();
}

double DraftPolicy::margin(std::span<const RoundRequest> round) const {
  if (round.size() <= 1) return 0;
  // While drafting is off (the next drafted round begins a trial), or before
  // the trial's first judged round while some request of the round has yet to
  // catch its draft model up, the trial's start-up is still ahead. Once every
  // request has drafted in the trial, that start-up is spent whatever comes
  // next; held to the trial margin still, the cost model decoded plain and
  // threw it away (two requests on the copy set; docs/decisions.md, "The
  // trial margin once its start-up is paid").
  const bool trial_ahead =
      guarded() &&
      (guard_.drafting_off(load_) || (guard_.judged_rounds(load_) == 0 && !start_up_paid(round)));
  return trial_ahead ? tuning_.trial_margin : tuning_.batch_margin;
}

bool DraftPolicy::start_up_paid(std::span<const RoundRequest> round) const {
  const int trial = guard_.trial(load_);
  if (trial == 0) return false;  // no trial begun at this load
  for (const RoundRequest& r : round) {
    const auto it = requests_.find(r.ctx.id);
    if (it == requests_.end() || it->second.drafted_in_trial != trial) return false;
  }
  return true;
}

int DraftPolicy::position_budget(int room, int k) const {
  if (k <= 0) return 0;
  return std::max(k, std::min(k + opt_.tree_extra, room));
}

void DraftPolicy::trim(const RoundPlan& plan, std::vector<Draft>& drafts,
                       const CostAwareStop* stop) {
  const std::vector<RoundRequest>& round = plan.requests;
  const bool trim_free = drafter_ && drafter_->free_proposals() &&
                         (opt_.adaptive || opt_.opt_out) && costs_.verify_points() >= 2;
  if (trim_free) {
    batch_.clear();
    for (size_t i = 0; i < round.size(); ++i) {
      const Draft& d = drafts[i];
      const double alpha = d.alpha >= 0 ? d.alpha : state(round[i].ctx.id).acceptance.alpha();
      batch_.push_back({alpha, round[i].pending, d.chain_length()});
    }
    choose(batch_, CostModel::Reading::Floored, margin(round), keep_);
    add_probes(round, batch_, keep_);
    for (size_t i = 0; i < round.size(); ++i)
      drafts[i].prune(keep_[i], static_cast<int>(drafts[i].tokens.size()));
  }
  if (stop) stop->trim(drafts);
  // Drafters propose main chains of at most k[i] tokens.
  tree_extras(plan, drafts);
  for (size_t i = 0; i < round.size(); ++i) drafts[i].prune(drafts[i].chain_length(), extra_[i]);
}

void DraftPolicy::tree_extras(const RoundPlan& plan, const std::vector<Draft>& drafts) {
  const std::vector<RoundRequest>& round = plan.requests;
  const std::vector<int>& k = plan.k;
  extra_.assign(round.size(), 0);
  room_.assign(round.size(), 0);
  bool any = false;
  for (size_t i = 0; i < round.size(); ++i) {
    room_[i] = std::min(opt_.tree_extra, plan.positions[i] - k[i]);
    any = any || (drafts[i].is_tree() && room_[i] > 0);
  }
  if (!any) return;
  // Fixed K: exactly the tree asked for.
  const bool judged = opt_.adaptive && costs_.verify_points() >= 2 && recent_tokens_ > 0;
  if (!judged || ++rounds_since_tree_ >= tuning_.tree_probe_every) {
    rounds_since_tree_ = 0;
    extra_ = room_;
    return;
  }
  // Each further position is worth its yield in tokens, at the recent rate;
  // the positions are priced one by one on top of the round's chains. The
  // decision rests on earlier rounds only: no token drawn this round moves it.
  const double yield = (tree_gained_ + tuning_.tree_prior_yield * tuning_.tree_prior_nodes) /
                       (tree_nodes_ + tuning_.tree_prior_nodes);
  const double worth_ms = yield * recent_ms_ / recent_tokens_;
  int positions = 0;
  for (size_t i = 0; i < round.size(); ++i)
    positions += round[i].pending + std::min(drafts[i].chain_length(), k[i]);
  // Between two noisy measured points the interpolated cost of a position can
  // read near zero: never less than the mean over the measured range.
  auto position_ms = [&](int m) {
    return std::max(costs_.verify_ms(m + 1) - costs_.verify_ms(m), costs_.mean_position_ms());
  };
  for (size_t i = 0; i < round.size(); ++i)
    while (extra_[i] < room_[i] && position_ms(positions) <= worth_ms) {
      ++extra_[i];
      ++positions;
    }
  if (std::any_of(extra_.begin(), extra_.end(), [](int e) { return e > 0; }))
    rounds_since_tree_ = 0;
}

void DraftPolicy::record_tree(int nodes, int gained) {
  if (nodes <= 0) return;
  tree_nodes_ = tuning_.tree_fade * tree_nodes_ + nodes;
  tree_gained_ = tuning_.tree_fade * tree_gained_ + gained;
}

void DraftPolicy::record_prefill(int tokens, double ms) {
  if (tokens >= tuning_.prefill_sample) costs_.record_prefill(tokens, ms);
}

void DraftPolicy::record_verdict(int id, const Draft& draft, int accepted) {
  RequestState& st = state(id);
  const int drafted = static_cast<int>(draft.tokens.size());
  if (st.reaching) st.reach_tokens += accepted + 1;
  if (drafted == 0) {
    st.rounds_since_draft++;
    return;
  }
  st.acceptance.update(accepted, accepted < drafted);
  pooled_.update(accepted, accepted < drafted);
  calibration_.record(draft, accepted);
  st.rounds_since_draft = 0;
}

void DraftPolicy::record_round(const RoundCosts& r) {
  // A change of the machine's speed rescales everything measured before it
  // (speculative/speed_shift.h), before this round's pass joins the medians.
  const double own = costs_.own_verify_ms(r.positions);
  const double shift = speed_shift_.observe(own > 0 ? r.verify_ms / own : 0);
  if (shift != 1) {
    costs_.rescale(shift);
    guard_.rescale(shift);
    recent_ms_ *= shift;
    ++speed_shifts_;
  }
  costs_.record_verify(r.positions, r.verify_ms);
  if (r.step_ms >= 0) costs_.record_draft_step(r.drafting, r.step_ms);
  recent_tokens_ = tuning_.recent_fade * recent_tokens_ + r.emitted;
  recent_ms_ = tuning_.recent_fade * recent_ms_ + r.total_ms;
  probe_budget_ms_ =
      std::min(tuning_.probe_budget_cap_ms, probe_budget_ms_ + tuning_.probe_share * r.total_ms);
  // A round is the guard's drafted kind when it verified drafts, or when the
  // plan had a draft model draft, whatever its early stop left to verify: the
  // catch-up and draft steps were paid, and counted as plain they would slow
  // the reference drafting is held to. A free drafter's round that found
  // nothing to propose cost what a plain round costs, and is one.
  if (guarded()) {
    const bool drafted = r.drafted > 0 || (r.drafting > 0 && !drafter_->free_proposals());
    guard_.record(r.requests, drafted, r.emitted, r.total_ms, drafted && start_up_, r.decoding);
  }
}

}  // namespace tandem
