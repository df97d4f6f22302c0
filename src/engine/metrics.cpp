#include "engine/metrics.h"

#include <algorithm>

namespace tandem {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double v) {
  for (size_t i = 0; i < bounds.size(); ++i)
    if (v <= bounds[i]) counts[i]++;
  counts.back()++;
  sum += v;
  count++;
}

}  // namespace tandem
