// The per-request random generator: xoshiro256** seeded through splitmix64.
// Written out rather than taken from <random> so that a seed gives the same
// stream on every platform and standard library.
#pragma once
#include <cstdint>

namespace tandem {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0);
  uint64_t next();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();

 private:
  uint64_t s_[4];
};

}  // namespace tandem
