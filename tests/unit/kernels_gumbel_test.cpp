// The position-keyed noise of reproducible sampling (kernels/gumbel_noise.h):
// Threefry-2x32-20 against the published known-answer vectors, the SIMD
// Gumbel-max choice against a scalar one that draws noise for every token (so the
// skipping of tokens that cannot win changes nothing), and the choice as a draw
// from the softmax (chi-square over many positions).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/gumbel_noise.h"
#include "support/stats.h"

using namespace tandem;
using kernels::NoiseKey;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The choice by definition: noise drawn for every token in scalar code.
struct Scored {
  int index = -1;
  float score = kNegInf;
};
Scored scalar_argmax(const std::vector<float>& x, float offset, float scale, NoiseKey key) {
  Scored best;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] == kNegInf) continue;
    const float s = (x[i] - offset) * scale + kernels::gumbel_noise(key, static_cast<int>(i));
    if (s > best.score) best = {static_cast<int>(i), s};
  }
  return best;
}

std::vector<float> random_logits(int n, uint32_t seed, float spread) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> x(n);
  for (float& v : x) v = normal(gen);
  return x;
}

}  // namespace

// Known-answer vectors of Threefry-2x32 with 20 rounds (Random123's kat_vectors:
// counter, key, result).
TEST(GumbelNoise, ThreefryMatchesTheKnownAnswers) {
  using A = std::array<uint32_t, 2>;
  EXPECT_EQ(kernels::threefry2x32(0, 0, 0, 0), (A{0x6b200159u, 0x99ba4efeu}));
  EXPECT_EQ(kernels::threefry2x32(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu),
            (A{0x1cb996fcu, 0xbb002be7u}));
  EXPECT_EQ(kernels::threefry2x32(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u),
            (A{0xc4923a9cu, 0x483df7a0u}));
}

TEST(GumbelNoise, DependsOnSeedPositionAndTokenOnly) {
  const NoiseKey key{42, 7};
  EXPECT_EQ(kernels::gumbel_noise(key, 3), kernels::gumbel_noise(key, 3));
  EXPECT_NE(kernels::gumbel_noise(key, 3), kernels::gumbel_noise(key, 4));
  EXPECT_NE(kernels::gumbel_noise(key, 3), kernels::gumbel_noise({42, 8}, 3));
  EXPECT_NE(kernels::gumbel_noise(key, 3), kernels::gumbel_noise({43, 7}, 3));
  // The bound the kernel skips by holds for the extreme uniform values.
  float lo = 1e9f, hi = -1e9f;
  for (int t = 0; t < 200000; ++t) {
    const float g = kernels::gumbel_noise(key, t);
    lo = std::min(lo, g);
    hi = std::max(hi, g);
  }
  EXPECT_LT(hi, kernels::kGumbelNoiseBound);
  EXPECT_GT(lo, -3.0f);
}

// The SIMD kernel skips blocks that cannot win and draws its noise with
// Highway's log: the same choice as drawing noise everywhere with std::log,
// except where two scores are within float rounding of each other (1e-4 covers
// a few ulps of scores up to ~20).
TEST(GumbelNoise, KernelChoosesWhatScalarNoiseEverywhereChooses) {
  int near_ties = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + (trial * 7919) % 5000;
    const float spread = trial % 3 == 0 ? 0.5f : trial % 3 == 1 ? 3.0f : 10.0f;
    auto x = random_logits(n, 1000 + trial, spread);
    if (trial % 4 == 0)  // masked tokens, as a constraint leaves them
      for (int i = 1; i < n; i += 3) x[i] = kNegInf;
    float max = kNegInf;
    int hint = -1;
    for (int i = 0; i < n; ++i)
      if (x[i] > max) max = x[i], hint = i;
    const float scale = trial % 2 ? 1.0f : 1.0f / 0.7f;
    const NoiseKey key{static_cast<uint64_t>(trial) * 0x9E3779B97F4A7C15ull, uint32_t(trial)};
    const Scored want = scalar_argmax(x, max, scale, key);
    const int got = kernels::gumbel_argmax(x.data(), nullptr, n, max, scale, key, hint);
    const int unhinted = kernels::gumbel_argmax(x.data(), nullptr, n, max, scale, key);
    ASSERT_EQ(got, unhinted) << "the hint changed the choice, trial " << trial;
    ASSERT_GE(got, 0);
    if (got != want.index) {
      const float s_got = (x[got] - max) * scale + kernels::gumbel_noise(key, got);
      EXPECT_NEAR(s_got, want.score, 1e-4f) << "trial " << trial;
      ++near_ties;
    }
  }
  EXPECT_LE(near_ties, 3) << "more than rounding can explain";
}

// A listed subset of tokens (ids ascending) scores exactly as in the full row.
TEST(GumbelNoise, ListedTokensScoreAsInTheFullRow) {
  const int n = 3000;
  auto x = random_logits(n, 7, 2.0f);
  std::vector<int> ids;
  std::vector<float> kept;
  for (int i = 0; i < n; i += 5) {
    ids.push_back(i);
    kept.push_back(x[i]);
  }
  std::vector<float> masked(n, kNegInf);
  for (int id : ids) masked[id] = x[id];
  for (uint32_t pos = 0; pos < 50; ++pos) {
    const NoiseKey key{99, pos};
    const int at = kernels::gumbel_argmax(kept.data(), ids.data(), static_cast<int>(ids.size()),
                                          0.0f, 1.0f, key);
    ASSERT_GE(at, 0);
    EXPECT_EQ(ids[at], kernels::gumbel_argmax(masked.data(), nullptr, n, 0.0f, 1.0f, key));
  }
}

TEST(GumbelNoise, AllMaskedGivesNone) {
  std::vector<float> x(40, kNegInf);
  EXPECT_EQ(kernels::gumbel_argmax(x.data(), nullptr, 40, 0.0f, 1.0f, {1, 2}), -1);
  EXPECT_EQ(kernels::gumbel_argmax(x.data(), nullptr, 0, 0.0f, 1.0f, {1, 2}), -1);
}

// Gumbel-max with the noise of independent positions draws from softmax(x / T):
// 40,000 positions of one row against the exact probabilities. A wrong noise
// (a biased uniform, a missing minus sign) moves mass by percents, which this
// many draws turn into p-values far below 0.001; the seed is fixed, so the test
// is deterministic.
TEST(GumbelNoise, ChoicesFollowTheSoftmax) {
  const std::vector<float> x = {1.0f, 2.5f, 0.0f, -1.0f, 2.0f, kNegInf, 0.5f, 1.5f};
  for (float t : {0.7f, 1.0f}) {
    std::vector<double> p(x.size());
    double z = 0;
    for (size_t i = 0; i < x.size(); ++i) z += p[i] = std::exp(x[i] / t);
    for (double& v : p) v /= z;
    std::vector<long> count(x.size());
    const int draws = 40000;
    for (int pos = 0; pos < draws; ++pos)
      count[kernels::gumbel_argmax(x.data(), nullptr, static_cast<int>(x.size()), 2.5f, 1.0f / t,
                                   {2024, static_cast<uint32_t>(pos)})]++;
    const auto chi = test::chi_square(count, p);
    std::printf("T=%.1f chi2 %.2f dof %d p-value %.4f\n", t, chi.statistic, chi.dof, chi.p_value);
    EXPECT_GT(chi.p_value, 0.001);
    EXPECT_EQ(count[5], 0) << "a masked token was chosen";
  }
}
