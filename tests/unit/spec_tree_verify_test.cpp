// Verification of tree drafts: recursive rejection sampling among several
// candidates keeps the emitted distribution exactly p (chi-square tests at fixed
// seeds, for fixed candidates and for candidates drawn from q without
// replacement, one level and two), and the greedy walk takes the argmax path.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "speculative/verifier.h"
#include "support/stats.h"

using namespace tandem;

namespace {

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -INFINITY);
  return logits;
}

// Optimal mode (recursive rejection sampling) unless told otherwise.
SamplingParams sampled(SamplingMode mode = SamplingMode::Optimal) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.mode = mode;
  return sp;
}

SamplingDistribution dist_of(const std::vector<double>& probs) {
  const auto logits = logits_of(probs);
  SamplingDistribution d;
  d.compute(logits.data(), static_cast<int>(logits.size()), sampled());
  return d;
}

// `n` distinct candidates drawn from q without replacement.
std::vector<int> draw_without_replacement(const SamplingDistribution& q, int n, Rng& rng) {
  std::vector<float> w(q.probs());
  std::vector<int> out;
  for (int j = 0; j < n; ++j) {
    out.push_back(sample_weights(w, rng));
    w[out.back()] = 0.0f;
  }
  return out;
}

void expect_follows(const char* label, const std::vector<long>& count,
                    const std::vector<double>& probs) {
  const auto chi = test::chi_square(count, probs);
  std::printf("%-36s chi2 %.2f, dof %d, p-value %.4f\n", label, chi.statistic, chi.dof,
              chi.p_value);
  // Fixed seeds: deterministic. A wrong residual (say, q_j not renormalised
  // after removing a candidate) moves mass by percents, which at 200k trials
  // gives a p-value of about 0.
  EXPECT_GT(chi.p_value, 0.001) << label;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(count[i], 0) << label << ": token " << i << " has p = 0";
    }
  }
}

constexpr int kTrials = 200000;

}  // namespace

TEST(TreeSampling, FixedCandidatesKeepP) {
  const std::vector<double> p{0.3, 0.05, 0.25, 0.1, 0.0, 0.2, 0.1};
  const auto pd = dist_of(p);
  for (const std::vector<int>& cands :
       {std::vector<int>{2, 5}, std::vector<int>{4, 0, 6}, std::vector<int>{1, 3, 5, 6}}) {
    Rng rng(11);
    std::vector<long> count(p.size());
    for (int t = 0; t < kTrials; ++t) {
      int token = -1;
      const int picked = accept_among(pd, nullptr, cands, rng, &token);
      count[picked >= 0 ? cands[picked] : token]++;
    }
    expect_follows("fixed candidates", count, p);
  }
}

TEST(TreeSampling, CandidatesDrawnFromQWithoutReplacementKeepP) {
  const std::vector<double> p{0.35, 0.25, 0.15, 0.1, 0.1, 0.05};
  const std::vector<std::vector<double>> qs{{0.1, 0.3, 0.05, 0.3, 0.15, 0.1},
                                            {0.0, 0.5, 0.0, 0.3, 0.2, 0.0},  // q = 0 where p > 0
                                            p};
  for (const auto& q : qs) {
    const auto pd = dist_of(p), qd = dist_of(q);
    for (int n : {2, 3}) {
      Rng rng(29 + n);
      std::vector<long> count(p.size());
      for (int t = 0; t < kTrials; ++t) {
        const auto cands = draw_without_replacement(qd, n, rng);
        int token = -1;
        const int picked = accept_among(pd, &qd, cands, rng, &token);
        count[picked >= 0 ? cands[picked] : token]++;
      }
      expect_follows(n == 2 ? "two candidates from q" : "three candidates from q", count, p);
    }
  }
}

TEST(TreeSampling, AcceptanceGrowsWithCandidates) {
  // More candidates accept more often: what trees are for.
  const auto pd = dist_of({0.4, 0.3, 0.2, 0.1});
  const auto qd = dist_of({0.1, 0.2, 0.3, 0.4});
  double rate[3] = {};
  for (int n = 1; n <= 3; ++n) {
    Rng rng(5);
    long accepted = 0;
    for (int t = 0; t < kTrials; ++t) {
      const auto cands = draw_without_replacement(qd, n, rng);
      int token = -1;
      accepted += accept_among(pd, &qd, cands, rng, &token) >= 0;
    }
    rate[n - 1] = static_cast<double>(accepted) / kTrials;
  }
  // One candidate accepts with sum min(p, q) = 0.6 (±0.003 at 200k trials).
  EXPECT_NEAR(rate[0], 0.6, 0.005);
  EXPECT_GT(rate[1], rate[0] + 0.05);
  EXPECT_GT(rate[2], rate[1] + 0.02);
}

// A two-level tree over a vocabulary of 4: the root has children A (token 0)
// and B (token 1); A has children 2 and 3, B has child 0. Each node's row has its
// own distribution; the first two emitted tokens must follow p(x) p(y | x).
class TreeSamplingModes : public ::testing::TestWithParam<SamplingMode> {};

// In optimal mode by recursive rejection sampling from one stream; in
// reproducible mode by the walk that follows the target's Gumbel choice, one seed
// per trial.
TEST_P(TreeSamplingModes, TwoLevelTreeEmitsTheTargetsJointDistribution) {
  const int V = 4;
  const std::vector<std::vector<double>> rows{
      {0.2, 0.3, 0.4, 0.1},      // root: row 0
      {0.1, 0.1, 0.5, 0.3},      // after token 0 (node 0, A)
      {0.6, 0.2, 0.1, 0.1},      // after token 1 (node 1, B)
      {0.25, 0.25, 0.25, 0.25},  // after node 2 (token 2 under A)
      {0.7, 0.1, 0.1, 0.1},      // after node 3 (token 3 under A)
      {0.1, 0.2, 0.3, 0.4}};     // after node 4 (token 0 under B)
  Draft d;
  d.tokens = {0, 1, 2, 3, 0};
  d.parent = {-1, -1, 0, 0, 1};
  // The second token is checked where the first was a candidate (0 or 1): the
  // tree has the rows of those prefixes only.
  std::map<std::pair<int, int>, long> joint;
  std::vector<long> first(V);
  Rng rng(77);
  for (int t = 0; t < kTrials; ++t) {
    std::vector<float> logits;
    for (const auto& r : rows) {
      const auto l = logits_of(r);
      logits.insert(logits.end(), l.begin(), l.end());
    }
    SamplingParams sp = sampled(GetParam());
    sp.seed = static_cast<uint64_t>(t);
    const Verdict v = verify_draft(logits.data(), V, d, sp, {0}, rng);
    const int x = v.path.empty() ? v.token : d.tokens[v.path[0]];
    first[x]++;
    if (v.path.empty()) continue;
    const int y = v.path.size() >= 2 ? d.tokens[v.path[1]] : v.token;
    joint[{x, y}]++;
    ASSERT_EQ(v.n_accepted, static_cast<int>(v.path.size()));
  }
  expect_follows("first token", first, rows[0]);
  // Given the first token, the second follows that node's row.
  for (int x : {0, 1}) {
    std::vector<long> second(V);
    for (int y = 0; y < V; ++y) second[y] = joint[{x, y}];
    expect_follows(x == 0 ? "second token after A" : "second token after B", second, rows[1 + x]);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, TreeSamplingModes,
                         ::testing::Values(SamplingMode::Optimal, SamplingMode::Reproducible),
                         [](const ::testing::TestParamInfo<SamplingMode>& info) {
                           return std::string(sampling_mode_name(info.param));
                         });

TEST(TreeGreedy, FollowsTheArgmaxPathAndTakesTheBonusBelowALeaf) {
  const int V = 5;
  // Root children: 3 (node 0), 1 (node 1); node 1's children: 4 (node 2), 2 (node 3).
  Draft d;
  d.tokens = {3, 1, 4, 2};
  d.parent = {-1, -1, 1, 1};
  auto one_hot = [&](int t) {
    std::vector<float> r(V, 0.0f);
    r[t] = 5.0f;
    return r;
  };
  std::vector<float> logits;
  for (int t : {1, 0, 2, 0, 4}) {  // argmax per row: root, node 0..3
    auto r = one_hot(t);
    logits.insert(logits.end(), r.begin(), r.end());
  }
  Rng rng(1);
  auto copy = logits;
  Verdict v = verify_draft(copy.data(), V, d, SamplingParams{}, {0}, rng);
  EXPECT_EQ(v.path, (std::vector<int>{1, 3}));  // 1 (second root child), then 2
  EXPECT_EQ(v.n_accepted, 2);
  EXPECT_EQ(v.token, 4);  // the bonus: node 3's row
  // The root's argmax among no children: nothing accepted.
  copy = logits;
  std::copy_n(one_hot(0).begin(), V, copy.begin());
  v = verify_draft(copy.data(), V, d, SamplingParams{}, {0}, rng);
  EXPECT_TRUE(v.path.empty());
  EXPECT_EQ(v.token, 0);
}

TEST(TreeGreedy, BadParentsAreErrors) {
  Draft d;
  d.tokens = {1, 2};
  d.parent = {-1, 1};  // a node its own parent
  std::vector<float> logits(3 * 4, 0.0f);
  Rng rng(1);
  EXPECT_THROW(verify_draft(logits.data(), 4, d, SamplingParams{}, {0}, rng), Error);
}
