#include "support/stats.h"

#include <cmath>
#include <numeric>

namespace tandem::test {
namespace {

// Regularised lower incomplete gamma P(a, x) by its power series (x < a + 1) and
// the upper Q(a, x) by Lentz's continued fraction otherwise.
double gamma_p_series(double a, double x) {
  double term = 1.0 / a, sum = term;
  for (int n = 1; n < 10000; ++n) {
    term *= x / (a + n);
    sum += term;
    if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
  }
  return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

double gamma_q_fraction(double a, double x) {
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - std::lgamma(a)) * h;
}

}  // namespace

double chi_square_upper_tail(double x, int dof) {
  if (x <= 0) return 1.0;
  const double a = dof / 2.0, h = x / 2.0;
  return h < a + 1 ? 1.0 - gamma_p_series(a, h) : gamma_q_fraction(a, h);
}

ChiSquare chi_square(const std::vector<long>& observed, const std::vector<double>& probs) {
  const double n = std::accumulate(observed.begin(), observed.end(), 0.0);
  ChiSquare r;
  double pooled_obs = 0, pooled_exp = 0;
  int cells = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    const double e = n * probs[i];
    if (e < 5) {
      pooled_obs += observed[i];
      pooled_exp += e;
      continue;
    }
    r.statistic += (observed[i] - e) * (observed[i] - e) / e;
    ++cells;
  }
  if (pooled_exp > 0) {
    r.statistic += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    ++cells;
  } else if (pooled_obs > 0) {
    r.statistic = INFINITY;  // observed something the distribution gives no mass
  }
  r.dof = std::max(cells - 1, 1);
  r.p_value = chi_square_upper_tail(r.statistic, r.dof);
  return r;
}

}  // namespace tandem::test
