// Runs the kernels on one Highway target for the lifetime of the object (tests
// sweep every target the build compiled and the machine supports), then gives
// the choice back to the dispatcher, whether the test passed or not.
#pragma once
#include <hwy/targets.h>

#include <cstdint>

struct TargetOverride {
  explicit TargetOverride(int64_t target) { hwy::SetSupportedTargetsForTest(target); }
  ~TargetOverride() { hwy::SetSupportedTargetsForTest(0); }
  TargetOverride(const TargetOverride&) = delete;
  TargetOverride& operator=(const TargetOverride&) = delete;
};
