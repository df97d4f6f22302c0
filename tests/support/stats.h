// Goodness-of-fit statistics for the sampling tests.
#pragma once
#include <vector>

namespace tandem::test {

struct ChiSquare {
  double statistic = 0;
  int dof = 0;
  double p_value = 1;  // P(X >= statistic) for X ~ chi-square(dof)
};

// Pearson's test of observed counts against expected probabilities. Cells whose
// expected count is below 5 are pooled into one (the usual validity rule).
ChiSquare chi_square(const std::vector<long>& observed, const std::vector<double>& probs);

// Upper tail of the chi-square distribution.
double chi_square_upper_tail(double x, int dof);

}  // namespace tandem::test
