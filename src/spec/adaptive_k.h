// Adaptive draft length. Each round, per request, pick the K that maximises the
// expected tokens per second:
//   tokens(K) = (1 - a^(K+1)) / (1 - a)        (Leviathan et al., 2023)
//   time(K)   = K * draft_step + verify(K + 1)
// from the request's running acceptance estimate a and the measured costs of a
// draft step and of a verify pass over K+1 positions. K = 0 is plain decoding.
#pragma once
#include <map>

namespace tandem {

// Measured wall-clock costs of the forward passes, in milliseconds.
class CostModel {
 public:
  // One target forward over `positions` (decode steps, verify passes, prefill chunks).
  void record_verify(int positions, double ms);
  void record_draft_step(double ms);             // one draft forward step
  // Estimated cost of a target forward over m positions: measured points, linear
  // between them, extrapolated with the fitted slope beyond.
  double verify_ms(int m) const;
  double draft_step_ms() const { return draft_ms_; }
  bool has_verify() const;

 private:
  std::map<int, double> verify_;  // EMA of the cost per position count
  double draft_ms_ = 0;
};

// Running estimate of the probability that the target accepts a drafted token.
// Each verified draft is a Bernoulli trial until the first rejection; drafts
// after a rejection were never judged and do not count. Older rounds fade so
// the estimate follows the text (a copy passage, then free prose).
class AcceptanceEstimate {
 public:
  void update(int accepted, bool rejected);
  double alpha() const;

 private:
  double accepted_ = 0, judged_ = 0;
};

// Expected tokens per round for acceptance a and draft length k.
double expected_tokens(double alpha, int k);
// The K in [0, k_max] that maximises expected tokens per millisecond.
int choose_k(double alpha, const CostModel& costs, int k_max);

}  // namespace tandem
