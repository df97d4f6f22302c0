// The sampling pipeline: each transform on hand-made logits, and draws whose
// frequencies match the distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "sampling/gumbel_sampler.h"
#include "sampling/sampler.h"
#include "support/stats.h"

using namespace tandem;

namespace {

std::vector<float> softmax(const std::vector<float>& l, float t) {
  std::vector<float> p(l.size());
  float m = *std::max_element(l.begin(), l.end());
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp((l[i] - m) / t);
  for (auto& x : p) x = static_cast<float>(x / s);
  return p;
}

int kept(const SamplingDistribution& d) {
  int n = 0;
  for (float p : d.probs()) n += p > 0;
  return n;
}

}  // namespace

TEST(Sampler, ArgmaxTakesFirstOfTiesAndRejectsNaN) {
  std::vector<float> x{1, 3, 3, 2};
  EXPECT_EQ(argmax(x.data(), 4), 1);
  x[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(argmax(x.data(), 4), Error);
}

TEST(Sampler, GreedyIsAPointMassOnTheArgmax) {
  std::vector<float> l{0.1f, 2.0f, -1.0f, 1.9f};
  SamplingDistribution d;
  d.compute(l.data(), 4, SamplingParams{});
  EXPECT_EQ(d[1], 1.0f);
  EXPECT_EQ(kept(d), 1);
}

TEST(Sampler, TemperatureIsASoftmaxOfScaledLogits) {
  std::vector<float> l{0.5f, 1.5f, -0.5f, 1.0f, 0.0f};
  SamplingParams p;
  p.temperature = 0.7f;
  SamplingDistribution d;
  d.compute(l.data(), 5, p);
  auto want = softmax(l, 0.7f);
  // float32 exp and division: a few ulps.
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(d[i], want[i], 1e-6f);
}

TEST(Sampler, TopKKeepsExactlyK) {
  std::vector<float> l(1000);
  for (int i = 0; i < 1000; ++i) l[i] = std::sin(i * 0.37f) * 3;
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 100;  // more than the first sorting chunk
  SamplingDistribution d;
  d.compute(l.data(), 1000, p);
  EXPECT_EQ(kept(d), 100);
  // Every kept token beats every dropped one.
  float min_kept = 1e9f, max_dropped = -1e9f;
  for (int i = 0; i < 1000; ++i) {
    if (d[i] > 0)
      min_kept = std::min(min_kept, l[i]);
    else
      max_dropped = std::max(max_dropped, l[i]);
  }
  EXPECT_GE(min_kept, max_dropped);
  double s = std::accumulate(d.probs().begin(), d.probs().end(), 0.0);
  EXPECT_NEAR(s, 1.0, 1e-5);  // float32 renormalisation over 100 terms
}

TEST(Sampler, TopPKeepsTheSmallestSetWithTheMass) {
  // Probabilities 0.5, 0.25, 0.125, ... (logits log2 spaced).
  std::vector<float> l(400);
  for (int i = 0; i < 400; ++i) l[i] = -static_cast<float>(i) * std::log(2.0f);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;  // 0.5 + 0.25 + 0.125 = 0.875 < 0.9 <= 0.9375: four tokens
  SamplingDistribution d;
  d.compute(l.data(), 400, p);
  EXPECT_EQ(kept(d), 4);
  EXPECT_NEAR(d[0], 0.5 / 0.9375, 1e-6);
  // A flat distribution needs more than the first chunk of 64 sorted candidates.
  std::vector<float> flat(1000, 0.0f);
  p.top_p = 0.5f;
  d.compute(flat.data(), 1000, p);
  EXPECT_EQ(kept(d), 500);
}

TEST(Sampler, MinPDropsTokensFarBelowTheBest) {
  std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.2f;  // floor 0.1: drops 0.05
  SamplingDistribution d;
  d.compute(l.data(), 4, p);
  EXPECT_EQ(d[3], 0.0f);
  EXPECT_NEAR(d[0], 0.5 / 0.95, 1e-6);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  std::vector<float> l{2.0f, -2.0f, 2.0f, 1.0f};
  std::vector<int> ctx{3, 0, 1, 1, 0};
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.penalty_last_n = 4;  // looks at {0, 1, 1, 0}: token 3 is outside the window
  apply_repetition_penalty(l.data(), 4, ctx.data(), 5, p);
  EXPECT_EQ(l[0], 1.0f);  // once, though it appears twice
  EXPECT_EQ(l[1], -4.0f);
  EXPECT_EQ(l[2], 2.0f);
  EXPECT_EQ(l[3], 1.0f);
  p.penalty_last_n = -1;
  apply_repetition_penalty(l.data(), 4, ctx.data(), 5, p);
  EXPECT_EQ(l[3], 0.5f);
}

TEST(Sampler, DrawsFollowTheDistribution) {
  std::vector<float> l{0.0f, 1.0f, 2.0f, -1.0f, 0.5f};
  SamplingParams p;
  p.temperature = 1.0f;
  SamplingDistribution d;
  d.compute(l.data(), 5, p);
  Rng rng(42);
  const int n = 200000;
  std::vector<int> count(5);
  for (int i = 0; i < n; ++i) count[d.sample(rng)]++;
  // Pearson chi-square with 4 degrees of freedom; 18.5 is the 0.999 quantile.
  // The seed is fixed, so this is deterministic, not flaky.
  double chi2 = 0;
  for (int i = 0; i < 5; ++i) {
    double e = n * d[i];
    chi2 += (count[i] - e) * (count[i] - e) / e;
  }
  EXPECT_LT(chi2, 18.5);
}

TEST(Sampler, SameSeedSameDraws) {
  Rng a(7), b(7), c(8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
  for (int i = 0; i < 1000; ++i) {
    double u = a.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

// Reproducible sampling draws from the same distribution as the inverse-CDF draw,
// with and without the filters (which decide the kept tokens): 30,000 positions
// of one row, chi-square against SamplingDistribution's probabilities. Fixed
// seed, so deterministic; a wrong kept set or scale moves mass by percents,
// far beyond p = 0.001 at this many draws.
TEST(GumbelSampler, ChoicesFollowTheRequestsDistribution) {
  const std::vector<float> logits{0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.7f, -0.3f, 0.9f};
  const int V = static_cast<int>(logits.size());
  SamplingParams configs[4];
  configs[0].temperature = 1.0f;
  configs[1].temperature = 0.7f;
  configs[1].top_k = 4;
  configs[2].temperature = 1.3f;
  configs[2].top_p = 0.8f;
  configs[3].temperature = 1.0f;
  configs[3].min_p = 0.2f;
  for (SamplingParams p : configs) {
    p.seed = 11;
    SamplingDistribution d;
    d.compute(logits.data(), V, p);
    GumbelSampler g;
    std::vector<long> count(V);
    const int n = 30000;
    for (int pos = 0; pos < n; ++pos) {
      std::vector<float> row = logits;
      count[g.choose(row.data(), V, p, pos)]++;
      ASSERT_EQ(row, logits) << "the row must come back unchanged";
    }
    std::vector<double> expected(d.probs().begin(), d.probs().end());
    const auto chi = test::chi_square(count, expected);
    std::printf("T=%.1f top_k=%d top_p=%.1f min_p=%.1f: chi2 %.2f dof %d p-value %.4f\n",
                p.temperature, p.top_k, p.top_p, p.min_p, chi.statistic, chi.dof, chi.p_value);
    EXPECT_GT(chi.p_value, 0.001);
    for (int i = 0; i < V; ++i) {
      if (d[i] == 0.0f) {
        EXPECT_EQ(count[i], 0) << "token " << i << " was filtered out";
      }
    }
  }
}

TEST(GumbelSampler, AFunctionOfSeedPositionAndRowAlone) {
  std::vector<float> row{0.3f, 0.1f, 0.2f, 0.25f, 0.0f, 0.15f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 5;
  GumbelSampler a, b;
  int differ_by_seed = 0, differ_by_position = 0;
  for (int pos = 0; pos < 200; ++pos) {
    const int t = a.choose(row.data(), 6, p, pos);
    // Another sampler, after other draws: the same token.
    b.choose(row.data(), 6, p, pos + 1000);
    EXPECT_EQ(b.choose(row.data(), 6, p, pos), t);
    SamplingParams other = p;
    other.seed = 6;
    differ_by_seed += a.choose(row.data(), 6, other, pos) != t;
    differ_by_position += a.choose(row.data(), 6, p, pos + 1) != t;
  }
  // Nearly flat rows: another seed or position changes most choices.
  EXPECT_GT(differ_by_seed, 100);
  EXPECT_GT(differ_by_position, 100);
}

TEST(GumbelSampler, ExcludeGivesTheRunnerUpAndGreedyTheArgmax) {
  std::vector<float> row{0.5f, 0.4f, 0.3f, 0.2f};
  SamplingParams p;
  p.temperature = 1.0f;
  GumbelSampler g;
  for (int pos = 0; pos < 100; ++pos) {
    const int first = g.choose(row.data(), 4, p, pos);
    const int second = g.choose(row.data(), 4, p, pos, first);
    EXPECT_NE(second, first);
    EXPECT_EQ(row[first], std::vector<float>({0.5f, 0.4f, 0.3f, 0.2f})[first]) << "restored";
  }
  SamplingParams greedy;
  EXPECT_EQ(g.choose(row.data(), 4, greedy, 3), 0);
  EXPECT_EQ(g.choose(row.data(), 4, greedy, 3, 0), 1);
}

TEST(GumbelSampler, ProbabilityIsTheRequestsP) {
  const std::vector<float> logits{0.0f, 1.0f, 2.0f, -1.0f};
  for (float t : {0.5f, 1.0f}) {
    SamplingParams p;
    p.temperature = t;
    SamplingDistribution d;
    d.compute(logits.data(), 4, p);
    GumbelSampler g;
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(g.probability(logits.data(), 4, p, i), d[i], 1e-6);
    p.top_k = 2;
    d.compute(logits.data(), 4, p);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(g.probability(logits.data(), 4, p, i), d[i], 1e-6);
  }
}

TEST(SamplingMode, NamesRoundTripAndBadNamesAreRefused) {
  for (SamplingMode m : {SamplingMode::Reproducible, SamplingMode::Optimal})
    EXPECT_EQ(parse_sampling_mode(sampling_mode_name(m)), m);
  try {
    parse_sampling_mode("exact");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exact"), std::string::npos);
  }
}
