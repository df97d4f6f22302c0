#include "spec/adaptive_k.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tandem {
namespace {
constexpr double kEma = 0.2;      // weight of a new cost measurement
constexpr double kFade = 0.95;    // per-round decay of old acceptance evidence
constexpr double kPriorAccepted = 2, kPriorJudged = 3;  // a prior of 2/3 worth 3 trials
}  // namespace

void CostModel::record_verify(int positions, double ms) {
  if (positions < 1) return;
  auto [it, fresh] = verify_.emplace(positions, ms);
  if (!fresh) it->second = (1 - kEma) * it->second + kEma * ms;
}

void CostModel::record_draft_step(double ms) {
  draft_ms_ = draft_ms_ == 0 ? ms : (1 - kEma) * draft_ms_ + kEma * ms;
}

bool CostModel::has_verify() const { return !verify_.empty(); }

double CostModel::verify_ms(int m) const {
  if (verify_.empty()) return 1.0;
  auto hit = verify_.find(m);
  if (hit != verify_.end()) return hit->second;
  if (verify_.size() == 1) {
    // One measurement: assume each extra position costs 10% of it until measured.
    const auto& [m0, t0] = *verify_.begin();
    return std::max(t0 * (1.0 + 0.1 * (m - m0)), t0 * 0.1);
  }
  // Linear between the neighbouring measurements, or extrapolated from the two
  // nearest ones (never decreasing with m).
  auto hi = verify_.upper_bound(m);
  if (hi == verify_.end()) --hi;
  if (hi == verify_.begin()) ++hi;
  auto lo = std::prev(hi);
  const double slope = std::max(0.0, (hi->second - lo->second) / (hi->first - lo->first));
  return std::max(lo->second + slope * (m - lo->first), 1e-6);
}

void AcceptanceEstimate::update(int accepted, bool rejected) {
  accepted_ = kFade * accepted_ + accepted;
  judged_ = kFade * judged_ + accepted + (rejected ? 1 : 0);
}

double AcceptanceEstimate::alpha() const {
  return (accepted_ + kPriorAccepted) / (judged_ + kPriorJudged);
}

double expected_tokens(double alpha, int k) {
  if (alpha >= 1.0) return k + 1;
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

int choose_k(double alpha, const CostModel& costs, int k_max) {
  int best_k = 0;
  double best = 0;
  for (int k = 0; k <= k_max; ++k) {
    double t = k * costs.draft_step_ms() + costs.verify_ms(k + 1);
    double rate = expected_tokens(alpha, k) / t;
    if (rate > best) {
      best = rate;
      best_k = k;
    }
  }
  return best_k;
}

}  // namespace tandem
