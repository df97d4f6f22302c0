#include "speculative/draft_stop.h"

#include <algorithm>

namespace tandem {

// Buckets fade slowly: calibration is a property of the draft/target pair more
// than of the text, and every request of the engine feeds it. Each starts at its
// midpoint, worth two verdicts.
ConfidenceCalibration::ConfidenceCalibration() {
  for (int b = 0; b < kBuckets; ++b) {
    const double mid = (b + 0.5) / kBuckets;
    buckets_.emplace_back(0.998, 2 * mid, 2);
  }
}

int ConfidenceCalibration::bucket(float confidence) {
  const int b = static_cast<int>(confidence * kBuckets);
  return std::clamp(b, 0, kBuckets - 1);
}

double ConfidenceCalibration::acceptance(float confidence) const {
  return buckets_[bucket(confidence)].alpha();
}

void ConfidenceCalibration::record(float confidence, bool accepted) {
  buckets_[bucket(confidence)].update(accepted ? 1 : 0, !accepted);
}

void ConfidenceCalibration::record(const Draft& draft, int accepted) {
  const int n = std::min(draft.tokens.size(), draft.confidence.size());
  for (int j = 0; j < n && j <= accepted; ++j) record(draft.confidence[j], j < accepted);
}

CostAwareStop::CostAwareStop(const ConfidenceCalibration& calibration, const CostModel& costs,
                             std::vector<double> next_alpha, int positions, int drafting,
                             double tokens_per_ms)
    : calibration_(calibration), costs_(costs) {
  next_alpha_.reserve(64);  // a batch's worth: later rounds' resets allocate nothing
  reset(next_alpha, positions, drafting, tokens_per_ms);
}

void CostAwareStop::reset(std::span<const double> next_alpha, int positions, int drafting,
                          double tokens_per_ms) {
  next_alpha_.assign(next_alpha.begin(), next_alpha.end());
  positions_ = positions;
  drafting_ = std::max(drafting, 1);
  tokens_per_ms_ = tokens_per_ms;
  const double plain_pass_ms = costs_.verify_ms(positions);
  if (plain_pass_ms > 0)
    tokens_per_ms_ = std::max(tokens_per_ms_, next_alpha_.size() / plain_pass_ms);
}

double CostAwareStop::reach(const Draft& draft, size_t n) const {
  double p = 1;
  for (size_t j = 0; j < n && j < draft.confidence.size(); ++j)
    p *= calibration_.acceptance(draft.confidence[j]);
  return p;
}

double CostAwareStop::extra_position_ms(int drafted) const {
  const int m = positions_ + drafted;
  return std::max(0.0, costs_.verify_ms(m + 1) - costs_.verify_ms(m));
}

bool CostAwareStop::keep_drafting(size_t i, const Draft& draft, int sharing, int drafted) const {
  const size_t s = draft.tokens.size();
  if (draft.confidence.size() < s || i >= next_alpha_.size()) return true;
  // A draft step is shared by the requests that take it.
  sharing = std::max(sharing, 1);
  const double cost_ms = costs_.draft_step_ms(sharing) / sharing + extra_position_ms(drafted);
  const double gain = reach(draft, s) * next_alpha_[i];
  return gain >= cost_ms * tokens_per_ms_;
}

void CostAwareStop::trim(std::vector<Draft>& drafts) const {
  for (Draft& d : drafts) {
    size_t n = static_cast<size_t>(d.chain_length());
    // Only deterministic drafts (no q): dropping a token sampled from q for what
    // it turned out to be would bias optimal sampling's output, whereas
    // keep_drafting decides on the next token before it is drawn, which keeps
    // sampling exact.
    if (d.confidence.size() < n || !d.q.empty()) continue;
    // Token n adds one token exactly when the target accepts all n.
    while (n > 0 &&
           reach(d, n) < extra_position_ms(drafting_ * (static_cast<int>(n) - 1)) * tokens_per_ms_)
      --n;
    d.prune(static_cast<int>(n), static_cast<int>(d.tokens.size()));
  }
}

}  // namespace tandem
