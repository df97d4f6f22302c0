#include "speculative/rate_guard.h"

#include <algorithm>

namespace tandem {

RateGuard::BatchState& RateGuard::state(int batch) {
  const size_t b = static_cast<size_t>(std::max(batch, 0));
  if (b >= by_batch_.size()) {
    const size_t had = by_batch_.size();
    by_batch_.resize(b + 1);
    for (size_t i = had; i <= b; ++i) {
      by_batch_[i].plain.resize(i + 1);
      by_batch_[i].drafted.resize(i + 1);
    }
  }
  return by_batch_[b];
}

const RateGuard::BatchState* RateGuard::find(int batch) const {
  return batch >= 0 && static_cast<size_t>(batch) < by_batch_.size() ? &by_batch_[batch] : nullptr;
}

double RateGuard::plain_rate(const BatchState& s, int decoding) {
  const int batch = static_cast<int>(s.plain.size()) - 1;
  const int n = decoded(batch, decoding);
  if (n <= 0) return 0;
  if (s.plain[n].rate() > 0) return s.plain[n].rate();
  // The nearest measured count, the larger of two as near (the whole batch's
  // rounds are the common ones).
  for (int d = 1; d <= batch; ++d)
    for (int m : {n + d, n - d})
      if (m >= 1 && m <= batch && s.plain[m].rate() > 0) return s.plain[m].rate() * n / m;
  return 0;
}

double RateGuard::drafted_rate(const BatchState& s) {
  double tokens = 0, ms = 0;
  for (const Faded& f : s.drafted) {
    tokens += f.tokens;
    ms += f.ms;
  }
  return ms > 0 ? tokens / ms : 0;
}

double RateGuard::drafted_over_plain(const BatchState& s) {
  double plain_ms = 0, ms = 0;
  for (size_t n = 1; n < s.drafted.size(); ++n) {
    if (s.drafted[n].ms <= 0) continue;
    const double rate = plain_rate(s, static_cast<int>(n));
    if (rate <= 0) return 0;  // no plain round yet
    plain_ms += s.drafted[n].tokens / rate;
    ms += s.drafted[n].ms;
  }
  return ms > 0 ? plain_ms / ms : 0;
}

bool RateGuard::allows(int batch) {
  BatchState& s = state(batch);
  if (s.off) {
    if (++s.rounds_off < s.wait) return false;
    // A trial: judged on its own rounds, not on the ones that lost before. Its
    // cost starts from zero after a loss, and from the credit after a dip (the
    // cost stands still while the batch size decodes plain).
    s.off = false;
    for (Faded& f : s.drafted) f = {};
    s.drafted_rounds = 0;
    s.trial_cost_ms = std::min(s.trial_cost_ms, 0.0);
    s.trial = ++trials_;
    return true;
  }
  if (s.trial == 0) s.trial = ++trials_;
  // A batch size that drafted from the start gets its plain reference once,
  // and then refresh_rounds fresh plain rounds after every plain_refresh
  // drafted ones.
  if (s.drafted_rounds + 1 >= tuning_.judge_after && s.plain_rounds < tuning_.plain_reference)
    return false;
  if (s.since_plain >= tuning_.plain_refresh && s.refresh_left == 0)
    s.refresh_left = tuning_.refresh_rounds;
  return s.refresh_left == 0;
}

int RateGuard::trial(int batch) const {
  const BatchState* s = find(batch);
  return s ? s->trial : 0;
}

void RateGuard::record(int batch, bool drafted, int emitted, double ms, bool start_up,
                       int decoding) {
  if (batch <= 0 || ms <= 0) return;
  BatchState& s = state(batch);
  const int n = decoded(batch, decoding);
  if (!drafted) {
    s.plain[n].add(tuning_.fade, emitted, ms);
    ++s.plain_rounds;
    // A refresh is of the rounds the drafted ones are held to: a round one
    // short while a new request prefills refreshes nothing of the whole
    // batch's reference (and where every round is short, the short ones are).
    if (s.drafted_decoding == 0 || n == s.drafted_decoding) {
      s.since_plain = 0;
      s.refresh_left = std::max(0, s.refresh_left - 1);
    }
    return;
  }
  ++s.since_plain;
  s.drafted_decoding = n;
  // The plain reference ages with the drafted rounds in between (its rate
  // stays; a refresh's rounds then weigh almost all).
  for (Faded& f : s.plain) f.add(tuning_.fade, 0, 0);
  // What the trial's rounds fell short of plain rounds decoding as many
  // requests, its start-up included: the trial's cost, which the wait after a
  // loss pays for.
  const double plain = plain_rate(s, n);
  if (plain > 0) s.trial_cost_ms += ms - emitted / plain;
  // The start-up is not the steady rate that drafting is judged by.
  if (start_up) return;
  ++s.drafted_rounds;
  for (Faded& f : s.drafted) f.add(tuning_.fade, 0, 0);
  s.drafted[n].add(1, emitted, ms);
  if (!has_evidence(s)) return;
  if (drafted_over_plain(s) < tuning_.keep_above) {
    s.off = true;
    s.rounds_off = 0;
    if (s.trial_cost_ms < 0) {  // in credit: a dip, not yet a loss
      s.wait = tuning_.in_credit_wait;
      return;
    }
    ++s.failed_trials;
    const double plain_round_ms = batch / plain_rate(s, batch);
    const double paid_by = s.trial_cost_ms / (tuning_.trial_share * plain_round_ms);
    s.wait = std::max(tuning_.retry_after << std::min(s.failed_trials - 1, tuning_.max_backoff),
                      static_cast<int>(std::min(paid_by, 1e9)));
  } else if (s.trial_cost_ms <= 0) {
    // Drafting has earned back all the trial cost: the next loss is not one
    // more in a row. A verdict to keep drafting forgives nothing before that:
    // forgiven, a trial that hovers at keep_above (chat prompts at four
    // requests) passed on its 16th round and lost on its 17th, and came back
    // after retry_after rounds with its whole start-up again.
    s.failed_trials = 0;
  }
}

void RateGuard::rescale(double f) {
  for (BatchState& s : by_batch_)
    for (std::vector<Faded>* rounds : {&s.plain, &s.drafted})
      for (Faded& r : *rounds) r.ms *= f;
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

double RateGuard::plain_rate(int batch, int decoding) const {
  const BatchState* s = find(batch);
  return s ? plain_rate(*s, decoding) : 0;
}

double RateGuard::drafted_over_plain(int batch) const {
  const BatchState* s = find(batch);
  return s ? drafted_over_plain(*s) : 0;
}

double RateGuard::drafted_rate(int batch) const {
  const BatchState* s = find(batch);
  return s ? drafted_rate(*s) : 0;
}

}  // namespace tandem
