#include "speculative/speed_shift.h"

#include <cmath>

namespace tandem {

double SpeedShift::observe(double ratio) {
  if (ratio <= 0) return 1;
  const double l = std::log(ratio);
  const int side = l > 0 ? 1 : -1;
  if (std::abs(l) < std::log(tuning_.factor)) {
    run_ = 0;
    return 1;
  }
  if (run_ == 0 || side != side_) {
    run_ = 0;
    log_sum_ = 0;
    side_ = side;
  }
  ++run_;
  log_sum_ += l;
  if (run_ < tuning_.rounds) return 1;
  const double factor = std::exp(log_sum_ / run_);
  run_ = 0;
  log_sum_ = 0;
  return factor;
}

}  // namespace tandem
