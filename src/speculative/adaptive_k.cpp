#include "speculative/adaptive_k.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace tandem {

void RunningCost::add(double ms) {
  recent_[static_cast<size_t>(next_)] = ms;
  next_ = (next_ + 1) % kWindow;
  count_ = std::min(count_ + 1, kWindow);
  // Insertion sort of at most seven values.
  std::array<double, kWindow> sorted{};
  for (int i = 0; i < count_; ++i) {
    int j = i;
    for (; j > 0 && sorted[j - 1] > recent_[i]; --j) sorted[j] = sorted[j - 1];
    sorted[j] = recent_[i];
  }
  const int mid = count_ / 2;
  median_ = count_ % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

void RunningCost::scale(double f) {
  for (double& ms : recent_) ms *= f;
  median_ *= f;
}

CostModel::CostModel() {
  verify_.reserve(512);
  draft_.reserve(128);
}

CostModel::Points::const_iterator CostModel::first_at_least(const Points& points, int m) {
  return std::lower_bound(points.begin(), points.end(), m,
                          [](const Point& p, int key) { return p.count < key; });
}

void CostModel::record(Points& points, int m, double ms) {
  auto it = points.begin() + (first_at_least(points, m) - points.begin());
  if (it == points.end() || it->count != m) it = points.insert(it, Point{m, RunningCost{}});
  it->cost.add(ms);
  // The readings from this point down (those above it are unchanged).
  const size_t i = static_cast<size_t>(it - points.begin());
  double cheapest = i + 1 < points.size() ? points[i + 1].ms : it->cost.ms();
  for (size_t j = i + 1; j-- > 0;) {
    cheapest = std::min(cheapest, points[j].cost.ms());
    points[j].ms = cheapest;
  }
}

const CostModel::Point* CostModel::verify_point(int m) const {
  const auto it = first_at_least(verify_, m);
  return it != verify_.end() && it->count == m ? &*it : nullptr;
}

bool CostModel::has_verify(int m) const { return verify_point(m) != nullptr; }

double CostModel::own_verify_ms(int m) const {
  const Point* p = verify_point(m);
  return p && p->cost.samples() >= 3 ? p->cost.ms() : 0;
}

void CostModel::rescale(double f) {
  for (Points* points : {&verify_, &draft_})
    for (Point& p : *points) {
      p.cost.scale(f);
      p.ms *= f;
    }
  prefill_per_token_.scale(f);
}

void CostModel::record_verify(int positions, double ms) {
  if (positions >= 1) record(verify_, positions, ms);
}

void CostModel::record_draft_step(int batch, double ms) {
  if (batch >= 1) record(draft_, batch, ms);
}

void CostModel::record_prefill(int tokens, double ms) {
  if (tokens >= 1) prefill_per_token_.add(ms / tokens);
}

double CostModel::draft_step_ms(int batch) const {
  if (!draft_.empty()) {
    // Beyond the largest batch measured, a draft step grows as the target's
    // pass over as many positions does (flat would price a batch of 4 at one
    // request's step: about 60% of what it costs).
    const Point& largest = draft_.back();
    if (batch > largest.count && draft_.size() == 1)
      return largest.ms * std::max(1.0, verify_ms(batch) / verify_ms(largest.count));
    return estimate(draft_, batch);
  }
  return draft_prior_ > 0 ? draft_prior_ * verify_ms(batch) : 0;
}

double CostModel::mean_position_ms() const {
  if (verify_.size() < 2) return 0;
  const Point& first = verify_.front();
  const Point& last = verify_.back();
  return std::max(0.0, (last.ms - first.ms) / (last.count - first.count));
}

double CostModel::verify_ms(int m, Reading reading) const {
  return estimate(verify_, m, reading == Reading::Floored ? prefill_per_token_.ms() : 0);
}

double CostModel::estimate(const Points& points, int m, double min_slope) {
  if (points.empty()) return 1.0;
  auto hi = std::upper_bound(points.begin(), points.end(), m,
                             [](int key, const Point& p) { return key < p.count; });
  if (hi != points.begin() && std::prev(hi)->count == m) return std::prev(hi)->ms;
  const Point& last = points.back();
  if (points.size() == 1) {
    // One measurement: flat in m until more are measured, or at least min_slope.
    return last.ms + (m > last.count ? min_slope * (m - last.count) : 0);
  }
  // Linear between the neighbouring measurements, or extrapolated from the two
  // nearest ones (the readings never decrease with m; never below a tenth of
  // the cheapest; beyond the largest, rising at least min_slope per position).
  if (hi == points.end()) --hi;
  if (hi == points.begin()) ++hi;
  auto lo = std::prev(hi);
  const double slope = (hi->ms - lo->ms) / (hi->count - lo->count);
  if (m > last.count) return last.ms + std::max(slope, min_slope) * (m - last.count);
  return std::max(lo->ms + slope * (m - lo->count), 0.1 * points.front().ms);
}

void AcceptanceEstimate::update(int accepted, bool rejected) {
  accepted_ = fade_ * accepted_ + accepted;
  judged_ = fade_ * judged_ + accepted + (rejected ? 1 : 0);
}

double AcceptanceEstimate::alpha() const {
  return (accepted_ + prior_accepted_) / (judged_ + prior_judged_);
}

double expected_tokens(double alpha, int k) {
  if (alpha >= 1.0) return k + 1;
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

void choose_draft_lengths(std::span<const DraftCandidate> batch, std::span<const int> k_choices,
                          const CostModel& costs, CostModel::Reading reading, double margin,
                          std::span<int> out, std::vector<int>& order) {
  const int n = static_cast<int>(batch.size());
  order.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[i] = i;
  // Most promising first; ties in the order given (a stable order, without the
  // buffer std::stable_sort would allocate).
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return batch[a].alpha > batch[b].alpha || (batch[a].alpha == batch[b].alpha && a < b);
  });
  int pending = 0;
  for (const auto& c : batch) pending += c.pending;
  // Plain decoding for everyone is the baseline.
  double best = (1 + margin) * n / costs.verify_ms(pending, reading);
  int best_k = 0, best_j = 0;
  for (int k : k_choices) {
    if (k <= 0) continue;
    double tokens = n, drafted = 0, catch_up = 0;
    int longest = 0;
    for (int j = 1; j <= n; ++j) {  // the j most promising requests draft
      const auto& c = batch[order[j - 1]];
      const int kk = std::min(k, c.cap);
      if (kk > 0) {
        const double expected = expected_tokens(c.alpha, kk);
        tokens += expected - 1;
        drafted += kk;
        longest = std::max(longest, kk);
        catch_up += c.catch_up_ms * std::min(1.0, expected / std::max(1, c.catch_up_spread));
      }
      const double ms = longest * costs.draft_step_ms(j) +
                        costs.verify_ms(pending + static_cast<int>(drafted), reading) + catch_up;
      if (tokens / ms > best) {
        best = tokens / ms;
        best_k = k;
        best_j = j;
      }
    }
  }
  std::fill(out.begin(), out.end(), 0);
  for (int j = 0; j < best_j; ++j) out[order[j]] = std::min(best_k, batch[order[j]].cap);
}

std::vector<int> choose_draft_lengths(const std::vector<DraftCandidate>& batch,
                                      const std::vector<int>& k_choices, const CostModel& costs,
                                      CostModel::Reading reading, double margin) {
  std::vector<int> out(batch.size()), order;
  choose_draft_lengths(batch, k_choices, costs, reading, margin, out, order);
  return out;
}

}  // namespace tandem
