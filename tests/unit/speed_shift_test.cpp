// The speed-shift watcher alone: ratios of passes to their medians, the
// changes of speed it reports.
#include <gtest/gtest.h>

#include <cmath>

#include "speculative/speed_shift.h"

using namespace tandem;

// A steady machine's passes stay within a few percent of their medians, and a
// stall or two is no change: the factor stays 1.
TEST(SpeedShift, NoiseAndStallsAreNoChange) {
  SpeedShift s;
  for (double r : {0.95, 1.08, 1.0, 0.93, 1.1, 1.19, 0.85}) EXPECT_EQ(s.observe(r), 1.0) << r;
  EXPECT_EQ(s.observe(2.5), 1.0);  // a stall
  EXPECT_EQ(s.observe(3.0), 1.0);  // and another
  EXPECT_EQ(s.observe(1.0), 1.0) << "the run ended before it was long enough";
  EXPECT_EQ(s.observe(1.5), 1.0);
  EXPECT_EQ(s.observe(1.5), 1.0);
  EXPECT_EQ(s.observe(1.0), 1.0);
  EXPECT_EQ(s.observe(1.5), 1.0) << "a run starts again after a pass at the median";
}

// Three passes in a row 1.3-1.5x faster: a change of speed, its size their
// geometric mean. Off passes on both sides make no run.
TEST(SpeedShift, ThreePassesOffOnOneSideAreAChange) {
  const SpeedShiftTuning t;
  ASSERT_EQ(t.rounds, 3);
  SpeedShift s(t);
  EXPECT_EQ(s.observe(1 / 1.3), 1.0);
  EXPECT_EQ(s.observe(1 / 1.5), 1.0);
  EXPECT_EQ(s.observe(0), 1.0) << "a pass with no median to hold it to breaks no run";
  EXPECT_NEAR(s.observe(1 / 1.4), 1 / std::cbrt(1.3 * 1.5 * 1.4), 1e-12);
  EXPECT_EQ(s.observe(1 / 1.4), 1.0) << "a new run begins after a change";
  SpeedShift both(t);
  for (double r : {1.5, 0.6, 1.5, 0.6, 1.5, 0.6}) EXPECT_EQ(both.observe(r), 1.0) << r;
  EXPECT_NEAR(both.observe(0.6), 1.0, 0) << "two slower in a row after the last faster one";
  EXPECT_NEAR(both.observe(0.6), 0.6, 1e-12);
}
