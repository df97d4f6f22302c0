// Stopping a draft early (with -k auto). A draft model knows how sure it is of
// each token it proposes: after a token it chose with probability 0.3 the target
// rarely agrees, and every draft step after it is wasted twice, once drafting and
// once verifying. So the drafter asks after every step whether one more token is
// worth its cost, from
//  - the probability that the target accepts everything drafted so far (each
//    token's acceptance read off the draft's confidence in it, calibrated by the
//    verdicts seen so far), times the acceptance expected of the next token;
//  - against what that token costs (its share of a draft step, which the
//    requests that take the step share, plus one more verified position) at
//    the rate the engine currently makes tokens, or at plain decoding's rate
//    where that is higher: slow speculative rounds must not lower the bar they
//    are judged by (docs/decisions.md, "The draft stop's bar").
// The rule decides per token, so a run of confident tokens is drafted long and a
// doubtful one cut short: the best fixed K can only pick one length for both.
#pragma once
#include <span>
#include <vector>

#include "speculative/adaptive_k.h"
#include "speculative/drafter.h"

namespace tandem {

// Probability that the target accepts a draft token, by the draft's probability
// of that token (its confidence). Learned from the verdicts; until then a token
// is assumed accepted about as often as the draft was sure of it.
class ConfidenceCalibration {
 public:
  ConfidenceCalibration();
  double acceptance(float confidence) const;
  void record(float confidence, bool accepted);
  // Record a verified draft: its judged tokens (up to the first rejection).
  void record(const Draft& draft, int accepted);

 private:
  static constexpr int kBuckets = 20;
  static int bucket(float confidence);
  std::vector<AcceptanceEstimate> buckets_;
};

// Asked by a drafter after each draft step.
class DraftStop {
 public:
  virtual ~DraftStop() = default;
  // Request i has drafted `draft` so far: draft one more token for it, in a
  // step that `sharing` requests take (it among them), after `drafted` tokens
  // drafted by every request of the round so far?
  virtual bool keep_drafting(size_t i, const Draft& draft, int sharing, int drafted) const = 0;
};

// The cost rule above, for one round of a batch.
class CostAwareStop final : public DraftStop {
 public:
  // next_alpha[i]: acceptance expected of request i's next token before it is
  // drafted (one entry per request of the round); positions: tokens the round's
  // verify pass feeds besides drafts; drafting: requests that draft (trim()'s
  // estimate of the verify pass);
  // tokens_per_ms: the engine's recent rate. The rate asked of a drafted token
  // is that, or plain decoding's (a token per request for a pass over
  // `positions`) where higher.
  CostAwareStop(const ConfidenceCalibration& calibration, const CostModel& costs,
                std::vector<double> next_alpha, int positions, int drafting, double tokens_per_ms);
  // The same rule for another round (the object is reused round after round).
  void reset(std::span<const double> next_alpha, int positions, int drafting, double tokens_per_ms);
  // A draft step costs what it costs whoever takes it: a request that drafts on
  // while the others of the batch have stopped pays it alone (charged a share
  // of the round's drafting requests, it drafted on where a lone step did not
  // pay: at four requests such rounds delivered 0.78-0.85x plain's rate;
  // docs/decisions.md, "A draft step's cost shared by those who take it").
  bool keep_drafting(size_t i, const Draft& draft, int sharing, int drafted) const override;
  // Deterministic drafts (no q: greedy, or reproducible sampling, whose output
  // does not depend on the drafts): drop trailing tokens whose verification
  // costs more than they are expected to add (their draft step is spent; one
  // more verified position is not). Drafts sampled from q are left whole (see
  // the definition).
  void trim(std::vector<Draft>& drafts) const;
  // Probability that the target accepts every token of the draft.
  double reach(const Draft& draft, size_t n) const;
  // Tokens per millisecond a drafted token is weighed against.
  double bar() const { return tokens_per_ms_; }

 private:
  // One verified position more than positions_ + `drafted`.
  double extra_position_ms(int drafted) const;

  const ConfidenceCalibration& calibration_;
  const CostModel& costs_;
  std::vector<double> next_alpha_;
  int positions_ = 0, drafting_ = 1;
  double tokens_per_ms_ = 0;
};

}  // namespace tandem
