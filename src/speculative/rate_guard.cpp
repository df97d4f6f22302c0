#include "speculative/rate_guard.h"

#include <algorithm>

namespace tandem {

RateGuard::BatchState& RateGuard::state(int batch) {
  const size_t b = static_cast<size_t>(std::max(batch, 0));
  if (b >= by_batch_.size()) by_batch_.resize(b + 1);
  return by_batch_[b];
}

const RateGuard::BatchState* RateGuard::find(int batch) const {
  return batch >= 0 && static_cast<size_t>(batch) < by_batch_.size() ? &by_batch_[batch] : nullptr;
}

bool RateGuard::allows(int batch) {
  BatchState& s = state(batch);
  if (s.off) {
    if (++s.rounds_off < s.wait) return false;
    // A trial: judged on its own rounds, not on the ones that lost before.
    s.off = false;
    s.drafted = {};
    s.drafted_rounds = 0;
    s.trial_cost_ms = 0;
    s.trial = ++trials_;
    return true;
  }
  if (s.trial == 0) s.trial = ++trials_;
  // A batch size that drafted from the start gets its plain reference once,
  // and then a fresh plain round now and then.
  if (s.drafted_rounds + 1 >= tuning_.judge_after && s.plain_rounds < tuning_.plain_reference)
    return false;
  return s.since_plain < tuning_.plain_refresh;
}

int RateGuard::trial(int batch) const {
  const BatchState* s = find(batch);
  return s ? s->trial : 0;
}

void RateGuard::record(int batch, bool drafted, int emitted, double ms, bool start_up) {
  if (batch <= 0 || ms <= 0) return;
  BatchState& s = state(batch);
  if (!drafted) {
    s.plain.add(tuning_.fade, emitted, ms);
    ++s.plain_rounds;
    s.since_plain = 0;
    return;
  }
  ++s.since_plain;
  // What the trial's rounds fell short of plain decoding, its start-up
  // included: the trial's cost, which the wait after a loss pays for.
  if (s.plain.rate() > 0) s.trial_cost_ms += ms - emitted / s.plain.rate();
  // The start-up is not the steady rate that drafting is judged by.
  if (start_up) return;
  ++s.drafted_rounds;
  s.drafted.add(tuning_.fade, emitted, ms);
  if (!has_evidence(s)) return;
  if (s.drafted.rate() < tuning_.keep_above * s.plain.rate()) {
    s.off = true;
    s.rounds_off = 0;
    ++s.failed_trials;
    const double plain_round_ms = batch / s.plain.rate();
    const double paid_by = s.trial_cost_ms / (tuning_.trial_share * plain_round_ms);
    s.wait = std::max(tuning_.retry_after << std::min(s.failed_trials - 1, tuning_.max_backoff),
                      static_cast<int>(std::min(paid_by, 1e9)));
  } else {
    s.failed_trials = 0;
    s.trial_cost_ms = 0;
  }
}

bool RateGuard::drafting_off(int batch) const {
  const BatchState* s = find(batch);
  return s && s->off;
}

bool RateGuard::judged(int batch) const {
  const BatchState* s = find(batch);
  return s && (s->off || has_evidence(*s));
}

int RateGuard::judged_rounds(int batch) const {
  const BatchState* s = find(batch);
  return s ? s->drafted_rounds : 0;
}

double RateGuard::plain_rate(int batch) const {
  const BatchState* s = find(batch);
  return s ? s->plain.rate() : 0;
}

double RateGuard::drafted_rate(int batch) const {
  const BatchState* s = find(batch);
  return s ? s->drafted.rate() : 0;
}

}  // namespace tandem
