// The speed-shift watcher alone: ratios of passes to their medians, the
// changes of speed it reports.
#include <gtest/gtest.h>

#include <cmath>

#include "speculative/speed_shift.h"

using namespace tandem;

// A steady machine's passes stay within a few percent of their medians, and a
// stall or two is no change: the factor stays 1.
TEST(SpeedShift, NoiseAndBurstsAreNoChange) {
  SpeedShift s;
  for (double r : {0.95, 1.08, 1.0, 0.93, 1.1, 1.14, 0.88}) EXPECT_EQ(s.observe(r), 1.0) << r;
  // A burst of three slow passes and the three after it (a busy host).
  for (double r : {1.71, 1.45, 1.49, 1.0, 0.76, 0.56, 0.56, 1.0}) EXPECT_EQ(s.observe(r), 1.0) << r;
  EXPECT_EQ(s.observe(1.5), 1.0);
  EXPECT_EQ(s.observe(1.5), 1.0);
  EXPECT_EQ(s.observe(1.5), 1.0);
  EXPECT_EQ(s.observe(1.0), 1.0);
  EXPECT_EQ(s.observe(1.5), 1.0) << "a run starts again after a pass at the median";
}

// Four passes in a row 1.2-1.5x faster: a change of speed, its size their
// geometric mean. Off passes on both sides make no run.
TEST(SpeedShift, FourPassesOffOnOneSideAreAChange) {
  const SpeedShiftTuning t;
  ASSERT_EQ(t.rounds, 4);
  SpeedShift s(t);
  EXPECT_EQ(s.observe(1 / 1.3), 1.0);
  EXPECT_EQ(s.observe(1 / 1.5), 1.0);
  EXPECT_EQ(s.observe(0), 1.0) << "a pass with no median to hold it to breaks no run";
  EXPECT_EQ(s.observe(1 / 1.2), 1.0);
  EXPECT_NEAR(s.observe(1 / 1.4), 1 / std::pow(1.3 * 1.5 * 1.2 * 1.4, 0.25), 1e-12);
  EXPECT_EQ(s.observe(1 / 1.4), 1.0) << "a new run begins after a change";
  SpeedShift both(t);
  for (double r : {1.5, 0.6, 1.5, 0.6, 1.5, 0.6}) EXPECT_EQ(both.observe(r), 1.0) << r;
  for (int i = 0; i < 2; ++i) EXPECT_EQ(both.observe(0.6), 1.0) << "slower in a row: " << i + 2;
  EXPECT_NEAR(both.observe(0.6), 0.6, 1e-12);
}
