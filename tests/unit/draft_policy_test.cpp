// The draft policy driven by a fake machine: verify passes and draft steps cost
// what a formula says, and the target accepts what a script says. No model runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <unordered_map>

#include "speculative/draft_hints.h"
#include "speculative/draft_policy.h"

using namespace tandem;

namespace {

// Draws nothing: the simulation makes up each round's drafts itself. With a
// catch-up cost per token it stands for a draft model: a request that drafts
// after decoding plainly for a while first costs that many tokens of catch-up.
class ScriptedDrafter final : public Drafter, public DraftCostHints {
 public:
  explicit ScriptedDrafter(double catch_up_ms_per_token = 0) : per_token_(catch_up_ms_per_token) {}
  std::string name() const override { return "scripted"; }
  double propose(std::span<const DraftContext>, std::span<const int>, std::vector<Draft>&,
                 const DraftStop*) override {
    return -1;
  }
  const DraftCostHints* cost_hints() const override { return per_token_ > 0 ? this : nullptr; }
  int catch_up_tokens(const DraftContext& req) const override {
    const auto it = missed_.find(req.id);
    return it == missed_.end() ? 0 : it->second;
  }
  double catch_up_ms(const DraftContext& req) const override {
    return per_token_ * catch_up_tokens(req);
  }
  double relative_cost() const override { return 0; }
  // Request id's draft model is this many tokens behind.
  void set_missed(int id, int tokens) { missed_[id] = tokens; }
  // Request id decoded a round: plainly (one more token to catch up on), or
  // with drafts (caught up first, by that many milliseconds).
  double decoded(int id, bool drafted) {
    int& missed = missed_[id];
    const double ms = drafted ? per_token_ * missed : 0;
    missed = drafted ? 0 : missed + 1;
    return ms;
  }

 private:
  double per_token_;
  std::unordered_map<int, int> missed_;
};

// A verify pass over m positions costs base + per_position * (m - 1) ms; a
// draft step costs step ms.
struct FakeCosts {
  double base = 40, per_position = 2, step = 8;
  double verify(int m) const { return base + per_position * (m - 1); }
};

// Accepted tokens of request i's draft of n tokens in round r.
using Script = std::function<int(int r, size_t i, int n)>;

class Simulation {
 public:
  Simulation(int requests, FakeCosts costs, DraftPolicyTuning tuning = {},
             double catch_up_ms_per_token = 0)
      : drafter_(catch_up_ms_per_token),
        policy_(&drafter_, SpecOptions{8, true}, tuning),
        costs_(costs),
        tokens_(requests),
        next_id_(requests) {
    for (auto& t : tokens_) t = {1, 2, 3};
    for (int i = 0; i < requests; ++i) ids_.push_back(i);
  }

  // Request i finished; a new one takes its place in the batch.
  void replace(size_t i) {
    policy_.forget(ids_[i]);
    ids_[i] = next_id_++;
  }

  // One round: the policy plans, drafts are made up (as long as planned), the
  // policy trims them, the script judges them. Returns the planned lengths.
  std::vector<int> round(const Script& accepted) {
    std::vector<RoundRequest> reqs;
    for (size_t i = 0; i < tokens_.size(); ++i)
      reqs.push_back({{ids_[i], tokens_[i], &sampling_, &rng_}, 1, 1000, 1000});
    RoundPlan plan;
    plan.requests = std::move(reqs);
    plan.load = load_;
    policy_.plan(plan);
    const std::vector<int>& k = plan.k;
    std::vector<Draft> drafts(k.size());
    for (size_t i = 0; i < k.size(); ++i) drafts[i].tokens.assign(k[i], 7);
    const auto stop = policy_.draft_stop(plan);
    policy_.trim(plan, drafts, stop);
    int positions = 0, emitted = 0, drafting = 0, longest = 0;
    double catch_up_ms = 0;
    for (size_t i = 0; i < k.size(); ++i) {
      const int n = static_cast<int>(drafts[i].tokens.size());
      catch_up_ms += drafter_.decoded(ids_[i], n > 0);
      const int a = n > 0 ? std::min(accepted(rounds_, i, n), n) : 0;
      policy_.record_verdict(ids_[i], drafts[i], a);
      positions += 1 + n;
      emitted += a + 1;
      drafting += k[i] > 0;
      longest = std::max(longest, n);
    }
    const double verify_ms = costs_.verify(positions);
    const double step_ms = drafting ? costs_.step : -1;
    double total_ms = verify_ms + longest * costs_.step + catch_up_ms;
    if (positions > static_cast<int>(k.size())) total_ms += hidden_drafting_ms_;
    total_ms_ += total_ms;
    catch_up_total_ms_ += catch_up_ms;
    emitted_ += emitted;
    // Rounds tell the rate guard their batch only where a test asks for it: the
    // other tests are about the cost model's own decisions.
    const int requests = tell_batch_ ? plan.guard_load() : 0;
    policy_.record_round({positions, verify_ms, drafting, step_ms, emitted, total_ms, requests,
                          positions - static_cast<int>(k.size()), static_cast<int>(k.size())});
    rounds_++;
    return k;
  }

  const DraftPolicy& policy() const { return policy_; }
  // The passes cost this from the next round on (the cost model learns it).
  void set_costs(FakeCosts costs) { costs_ = costs; }
  // The engine's load stated with every plan (requests decoding and
  // prefilling; 0: the decoding batch).
  void set_load(int load) { load_ = load; }
  // Drafted rounds cost this much more than the cost model can see (work per
  // verified token outside the passes it times), and rounds report their batch
  // size to the rate guard.
  void hide_drafting_cost(double ms) {
    hidden_drafting_ms_ = ms;
    tell_batch_ = true;
  }
  // Request i's draft model falls this many tokens behind.
  void set_missed(size_t i, int tokens) { drafter_.set_missed(ids_[i], tokens); }
  // Tokens per millisecond over every round so far.
  double rate() const { return total_ms_ > 0 ? emitted_ / total_ms_ : 0; }
  // Milliseconds of every round so far, and the draft model's catch-ups in them.
  double total_ms() const { return total_ms_; }
  double catch_up_ms() const { return catch_up_total_ms_; }
  // Tokens emitted by every round so far.
  int64_t emitted() const { return emitted_; }

 private:
  ScriptedDrafter drafter_;
  DraftPolicy policy_;
  FakeCosts costs_;
  std::vector<std::vector<int>> tokens_;
  std::vector<int> ids_;
  int next_id_ = 0;
  int load_ = 0;
  SamplingParams sampling_;
  Rng rng_;
  int rounds_ = 0;
  double hidden_drafting_ms_ = 0, total_ms_ = 0, catch_up_total_ms_ = 0;
  bool tell_batch_ = false;
  int64_t emitted_ = 0;
};

int drafting(const std::vector<int>& k) {
  return static_cast<int>(std::count_if(k.begin(), k.end(), [](int x) { return x > 0; }));
}

const Script kAcceptAll = [](int, size_t, int n) { return n; };
const Script kRejectAll = [](int, size_t, int) { return 0; };

}  // namespace

// Costs are learned from the rounds: a plain round first (nothing is known), one
// request of the batch exploring a few tokens next, then every request drafts
// where the measurements say it pays; the exploring round is not repeated.
TEST(DraftPolicy, ExploresOnceThenDraftsWhereItPays) {
  Simulation sim(4, FakeCosts{});
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 0) << "no cost measured yet: a plain round";
  const std::vector<int> explore = sim.round(kAcceptAll);
  EXPECT_EQ(drafting(explore), 1) << "one request explores";
  EXPECT_EQ(*std::max_element(explore.begin(), explore.end()), DraftPolicyTuning{}.explore_draft);
  for (int r = 0; r < 20; ++r) EXPECT_EQ(drafting(sim.round(kAcceptAll)), 4) << "round " << r;
  EXPECT_TRUE(sim.policy().costs().has_draft_step());
}

// A round that would begin a trial asks for the larger margin (trial_margin),
// since the trial's start-up and its rounds until the verdict are paid whatever
// the verdict: at these costs four requests drafting are expected to gain about
// 20% over a plain batch (draft step 18 ms, 20.7 ms scaled to four requests;
// acceptance read at 0.9): enough for batch_margin's 10%, not for a trial.
TEST(DraftPolicy, ATrialBeginsOnlyForTheTrialMargin) {
  const FakeCosts costs{40, 2, 18};
  Simulation sim(4, costs);
  sim.round(kAcceptAll);  // plain
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 1) << "one request explores";
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 0) << "a 20% gain begins no trial";
  DraftPolicyTuning bolder;
  bolder.trial_margin = bolder.batch_margin;
  Simulation sim_bolder(4, costs, bolder);
  sim_bolder.round(kAcceptAll);
  sim_bolder.round(kAcceptAll);
  EXPECT_EQ(drafting(sim_bolder.round(kAcceptAll)), 4) << "the same gain clears batch_margin";
}

// Once a trial is judging (its first judged round recorded), batch_margin's 10%
// applies again: a batch that began drafting where it gained 60%, and whose draft
// step then slows to where it gains about 20%, drafts on. Asked for the trial
// margin's 25% instead (batch_margin set to it), the same batch stops.
TEST(DraftPolicy, AJudgedTrialDraftsOnAtTheBatchMargin) {
  // Nine drafted tokens in ten accepted: acceptance about 0.9.
  auto ninety = [] {
    auto seen = std::make_shared<int>(0);
    return Script([seen](int, size_t, int n) {
      for (int a = 0; a < n; ++a)
        if (++*seen % 10 == 0) return a;
      return n;
    });
  };
  int late_batch = 0, late_trial = 0;
  for (bool batch_margin : {true, false}) {
    DraftPolicyTuning tuning;
    if (!batch_margin) tuning.batch_margin = tuning.trial_margin;
    Simulation sim(4, FakeCosts{40, 2, 8}, tuning);
    sim.hide_drafting_cost(0);  // rounds tell the guard their batch
    const Script script = ninety();
    for (int r = 0; r < 20; ++r) sim.round(script);
    EXPECT_EQ(drafting(sim.round(script)), 4) << "drafting began, batch margin " << batch_margin;
    sim.set_costs(FakeCosts{40, 2, 18});
    // The cost model learns the slower step over some rounds (a running
    // average; acceptance's ups and downs); rounds 40-74 after the change are
    // counted, before the guard's own verdict on the slower rounds (drafting
    // past its best length, they fall below plain about 80 rounds in).
    int late = 0;
    for (int r = 0; r < 75; ++r) late += drafting(sim.round(script)) == 4 && r >= 40;
    (batch_margin ? late_batch : late_trial) = late;
  }
  EXPECT_GE(late_batch, 30) << "a judging trial keeps the 10% margin";
  EXPECT_LE(late_trial, 4) << "at 25% the slower batch stops";
}

// A request with no verdicts of its own is read at the acceptance the requests
// before it saw, not at a hopeful constant: in a batch where drafting pays at
// acceptance 0.9 but not at what the text gets, new requests decode plainly.
TEST(DraftPolicy, NewRequestsStartFromThePooledAcceptance) {
  const FakeCosts costs{40, 4, 8};  // at batch 4: pays at acceptance 0.9 (by 30%), not at 0.5
  // The target accepts the first drafted token every other round, nothing else.
  const Script half = [](int r, size_t, int n) { return r % 2 == 0 ? std::min(n, 1) : 0; };
  Simulation fresh(4, costs);
  fresh.round(half);  // plain
  fresh.round(half);  // one request explores
  EXPECT_EQ(drafting(fresh.round(half)), 4) << "no evidence yet: every request drafts hopefully";
  Simulation sim(4, costs);
  for (int r = 0; r < 60; ++r) sim.round(half);
  EXPECT_LT(sim.policy().acceptance(0), 0.6);
  for (size_t i = 0; i < 4; ++i) sim.replace(i);
  EXPECT_EQ(drafting(sim.round(half)), 0) << "new requests read at what earlier ones got";
}

// Drafts the target rejects stop being made: after a few judged drafts every
// request decodes plainly, apart from probes.
TEST(DraftPolicy, StopsDraftingWhereTheTargetRejects) {
  Simulation sim(4, FakeCosts{});
  for (int r = 0; r < 40; ++r) sim.round(kRejectAll);
  int drafted = 0;
  for (int r = 0; r < 100; ++r) drafted += drafting(sim.round(kRejectAll));
  EXPECT_LE(drafted, 100 / DraftPolicyTuning{}.probe_every + 4) << "probes only";
  EXPECT_LT(sim.policy().acceptance(0), 0.3);
}

// Where each verified position costs as much as a decode step, drafting cannot
// pay even when every draft is accepted: no request drafts, not even to probe.
TEST(DraftPolicy, StopsDraftingWhereVerifyingCannotPay) {
  Simulation sim(2, FakeCosts{40, 40, 8});
  for (int r = 0; r < 10; ++r) sim.round(kAcceptAll);
  for (int r = 0; r < 100; ++r) EXPECT_EQ(drafting(sim.round(kAcceptAll)), 0) << "round " << r;
}

// Requests admitted together stop drafting together and come due for probes
// together: a round carries one probe at most. (A cheap draft step, so that a
// probe pays in a batch of eight at a hopeful acceptance.)
TEST(DraftPolicy, SendsAtMostOneProbeARound) {
  Simulation sim(8, FakeCosts{40, 1, 0.5});
  for (int r = 0; r < 40; ++r) sim.round(kRejectAll);
  int probes = 0;
  for (int r = 0; r < 600; ++r) {
    const std::vector<int> k = sim.round(kRejectAll);
    ASSERT_LE(drafting(k), 1) << "round " << r;
    if (drafting(k) == 1) {
      EXPECT_EQ(*std::max_element(k.begin(), k.end()), 1) << "a probe drafts one token";
      probes++;
    }
  }
  EXPECT_GE(probes, 8) << "every request was probed";
}

// A draft model's probe first catches up on every token its request decoded
// without it, so waiting longer between probes does not make them cheaper. Paid
// from a budget of probe_share of the time, the catch-ups stay within that
// share: at 3 ms a token against ~45 ms rounds in a batch of four (probing at
// the backed-off pace cost about a quarter of the time) probes become rare; at
// 0.1 ms a token every request is still probed now and then.
TEST(DraftPolicy, ProbesOfADraftModelCostAtMostTheirShare) {
  const DraftPolicyTuning t;
  const FakeCosts costs{40, 1, 0.5};  // a probe pays at a hopeful acceptance
  // Catch-up ms over all ms after drafting stopped, and the probes sent.
  auto run = [&](const DraftPolicyTuning& tuning, double catch_up_per_token, int& probes) {
    Simulation sim(4, costs, tuning, catch_up_per_token);
    for (int r = 0; r < 40; ++r) sim.round(kRejectAll);  // drafting stops
    const double ms0 = sim.total_ms(), catch_up0 = sim.catch_up_ms();
    probes = 0;
    for (int r = 0; r < 4000; ++r) probes += drafting(sim.round(kRejectAll));
    return (sim.catch_up_ms() - catch_up0) / (sim.total_ms() - ms0);
  };
  int probes = 0;
  EXPECT_LE(run(t, 3.0, probes), t.probe_share) << "dear catch-ups";
  const double cheap = run(t, 0.1, probes);
  EXPECT_LE(cheap, t.probe_share) << "cheap catch-ups";
  EXPECT_GE(probes, 8) << "cheap catch-ups: requests are still probed";

  // Without the budget's limit (a share large enough never to hold a probe
  // back), the dear run spends far more on catch-ups.
  DraftPolicyTuning unlimited = t;
  unlimited.probe_share = 1;
  unlimited.probe_budget_cap_ms = 1e9;
  EXPECT_GT(run(unlimited, 3.0, probes), 5 * t.probe_share);
}

// A round whose plan drafted counts as drafted for the rate guard even when the
// early stop or the trim left nothing to verify: its catch-up and draft steps
// were paid. Counted as plain, such rounds (here 100 ms for what plain does in
// 40) would slow the reference and drafting would never be judged to lose.
TEST(DraftPolicy, RoundsThatPlannedDraftsAreDraftedForTheGuard) {
  ScriptedDrafter drafter;
  DraftPolicy policy(&drafter, SpecOptions{8, true});
  for (int r = 0; r < 3; ++r) policy.record_round({4, 40, 0, -1, 4, 40, 4, 0});
  for (int r = 0; r < 2 * RateGuardTuning{}.judge_after; ++r)
    policy.record_round({4, 40, 4, 30, 4, 100, 4, 0});  // drafts planned, none verified
  EXPECT_TRUE(policy.rate_guard().drafting_off(4));
  EXPECT_NEAR(policy.rate_guard().plain_rate(4), 0.1, 1e-9) << "the plain reference is intact";
}

// A free drafter's round (n-gram, suffix) whose lookup found nothing verified no
// draft and cost what a plain round costs: the guard counts it as plain. As
// drafted, such rounds (a hair slower than plain for the lookup) turned
// drafting off at one request before the text turned repetitive.
TEST(DraftPolicy, AFreeDrafterRoundThatProposedNothingIsPlainForTheGuard) {
  struct FreeDrafter final : Drafter {
    std::string name() const override { return "free"; }
    bool free_proposals() const override { return true; }
    double propose(std::span<const DraftContext>, std::span<const int>, std::vector<Draft>&,
                   const DraftStop*) override {
      return 0.1;
    }
  } drafter;
  DraftPolicy policy(&drafter, SpecOptions{4, false});
  for (int r = 0; r < 3; ++r) policy.record_round({1, 20, 0, -1, 1, 20, 1, 0});
  for (int r = 0; r < 4 * RateGuardTuning{}.judge_after; ++r)
    policy.record_round({1, 20, 1, 0.1, 1, 20.5, 1, 0});  // lookups planned, nothing found
  EXPECT_FALSE(policy.rate_guard().drafting_off(1));
  EXPECT_FALSE(policy.rate_guard().judged(1)) << "no drafted round to judge";
}

// While probes fail, each waits twice as long as the one before, up to
// probe_every << max_probe_backoff rounds.
TEST(DraftPolicy, ProbesBackOffWhileTheyFail) {
  const DraftPolicyTuning t;
  Simulation sim(1, FakeCosts{}, t);
  std::vector<int> drafted_in;  // rounds that drafted
  for (int r = 0; r < 2000; ++r)
    if (drafting(sim.round(kRejectAll)) > 0) drafted_in.push_back(r);
  // The first rounds draft until enough drafts were judged; the probes follow.
  std::vector<int> gaps;
  for (size_t i = 1; i < drafted_in.size(); ++i)
    if (drafted_in[i] - drafted_in[i - 1] > 1) gaps.push_back(drafted_in[i] - drafted_in[i - 1]);
  ASSERT_GE(gaps.size(), 6u);
  for (size_t i = 0; i < gaps.size(); ++i) {
    const int wait = t.probe_every << std::min(static_cast<int>(i), t.max_probe_backoff);
    EXPECT_EQ(gaps[i], wait + 1) << "probe " << i;
  }
}

// Text that turns predictable again: the probes are accepted, the estimate
// recovers, and the request drafts again, longer than a probe.
TEST(DraftPolicy, ResumesDraftingWhenItPaysAgain) {
  Simulation sim(1, FakeCosts{});
  constexpr int kTurn = 60;
  const Script turns = [](int r, size_t, int n) { return r < kTurn ? 0 : n; };
  for (int r = 0; r < kTurn; ++r) sim.round(turns);
  ASSERT_LT(sim.policy().acceptance(0), 0.3) << "drafting had stopped";
  int first_long = -1;
  for (int r = kTurn; r < 2000 && first_long < 0; ++r) {
    const std::vector<int> k = sim.round(turns);
    if (k[0] > 1) first_long = r;
  }
  ASSERT_GE(first_long, 0) << "drafting never resumed";
  for (int r = 0; r < 50; ++r) EXPECT_GT(drafting(sim.round(turns)), 0) << "round " << r;
}

namespace {

// A main chain of three tokens and two nodes beside it.
Draft small_tree() {
  Draft d;
  d.tokens = {7, 8, 9, 5, 6};
  d.parent = {-1, 0, 1, -1, 0};
  return d;
}

// Trimming one request's tree: how many nodes survive.
int kept_nodes(DraftPolicy& policy) {
  Rng rng;
  SamplingParams sp;
  std::vector<int> toks{1, 2, 3};
  RoundPlan plan;
  plan.requests = {{{0, toks, &sp, &rng}, 1, 1000, 1000, 1000}};
  plan.k = {3};
  plan.positions = {3 + policy.options().tree_extra};
  std::vector<Draft> drafts{small_tree()};
  policy.trim(plan, drafts, nullptr);
  return static_cast<int>(drafts[0].tokens.size());
}

}  // namespace

// With -k auto, nodes beside the main chain are verified while what such nodes
// added pays for their positions; otherwise only in one round of tree_probe_every.
TEST(DraftPolicy, KeepsTreeNodesWhereTheyPay) {
  ScriptedDrafter drafter;
  DraftPolicy policy(&drafter, SpecOptions{8, true, true, 4});
  // Verify: 40 ms for one position, 2 ms per further one; about 21 ms a token.
  policy.record_round({1, 40, 0, -1, 1, 40});
  policy.record_round({6, 50, 1, 8, 4, 66});
  EXPECT_EQ(kept_nodes(policy), 5) << "the prior yield (0.2 tokens a node) pays for 2 ms";
  policy.record_tree(100, 0);  // a hundred nodes, not one token
  int trees = 0;
  const int rounds = 3 * DraftPolicyTuning{}.tree_probe_every;
  for (int r = 0; r < rounds; ++r) {
    const int n = kept_nodes(policy);
    EXPECT_TRUE(n == 3 || n == 5) << n;
    trees += n == 5;
  }
  EXPECT_EQ(trees, 3) << "one probe in tree_probe_every rounds";
  policy.record_tree(10, 40);  // nodes that pay again
  EXPECT_EQ(kept_nodes(policy), 5);
}

// Fixed K verifies exactly the tree asked for; chains-only options prune trees.
TEST(DraftPolicy, FixedKKeepsTheTreeAndNoTreesMeansChains) {
  ScriptedDrafter drafter;
  DraftPolicy fixed(&drafter, SpecOptions{3, false, true, 4});
  EXPECT_EQ(kept_nodes(fixed), 5);
  DraftPolicy one(&drafter, SpecOptions{3, false, true, 1});
  EXPECT_EQ(kept_nodes(one), 4);
  DraftPolicy chains(&drafter, SpecOptions{3, false, true, 0});
  EXPECT_EQ(kept_nodes(chains), 3);
}

namespace {

// An engine's KV room that holds plain steps (no positions beyond the tokens)
// but no drafts.
class RoomForPlainStepsOnly final : public KvBudget {
 public:
  bool fits(std::span<const int> positions, std::span<const int>) const override {
    return std::all_of(positions.begin(), positions.end(), [](int p) { return p == 0; });
  }
};

}  // namespace

// The policy alone plans a round, within the KV room the engine states: where
// the drafts would not fit, the round drafts nothing; the plan's positions are
// what each request's drafts may write (the main chain and its tree nodes).
TEST(DraftPolicy, PlansWithinTheKvRoomTheEngineStates) {
  ScriptedDrafter drafter;
  DraftPolicy policy(&drafter, SpecOptions{4, false, false, 2});
  Rng rng;
  SamplingParams sp;
  std::vector<int> toks{1, 2, 3};
  const std::vector<RoundRequest> round{{{0, toks, &sp, &rng}, 1, 1000, 1000, 1000},
                                        {{1, toks, &sp, &rng}, 1, 3, 1000, 5}};
  const RoundPlan free_plan = policy.plan(round);
  EXPECT_EQ(free_plan.k, (std::vector<int>{4, 3})) << "K, within each request's room";
  EXPECT_EQ(free_plan.positions, (std::vector<int>{6, 5})) << "chain + tree, within kv_room";
  EXPECT_EQ(free_plan.requests.size(), 2u);
  const RoomForPlainStepsOnly tight;
  const RoundPlan plan = policy.plan(round, &tight);
  EXPECT_EQ(plan.k, (std::vector<int>{0, 0}));
  EXPECT_EQ(plan.positions, (std::vector<int>{0, 0}));
  EXPECT_FALSE(plan.drafts());
}

// Explored for a batch size once a plain pass of that many positions, a second
// verify point and a draft step are measured: what benchmarks warm up for.
TEST(DraftPolicy, ExploredOnceItsCostsAreMeasured) {
  ScriptedDrafter drafter;
  DraftPolicy policy(&drafter, SpecOptions{8, true});
  EXPECT_FALSE(policy.explored(1));
  policy.record_round({1, 40, 0, -1, 1, 40});  // a plain round of one request
  EXPECT_FALSE(policy.explored(1)) << "no draft step measured yet";
  policy.record_round({6, 50, 1, 8, 4, 66});  // one request drafting 5
  EXPECT_TRUE(policy.explored(1));
  EXPECT_FALSE(policy.explored(3)) << "no pass of 3 positions measured";
  DraftPolicy plain(nullptr, SpecOptions{});
  EXPECT_TRUE(plain.explored(4)) << "plain decoding has nothing to explore";
}

// The cost model predicts that drafting pays, but every drafted round costs
// more than it can see: the realised rate at that batch size falls below
// plain, drafting turns off there, and trials come ever more rarely, so the
// rounds keep close to the plain rate.
TEST(DraftPolicy, RealisedRateBelowPlainTurnsDraftingOff) {
  const FakeCosts costs{40, 2, 8};
  // Half of each draft accepted: by the visible costs drafting pays.
  const Script half = [](int, size_t, int n) { return n / 2; };
  Simulation sim(4, costs);
  sim.hide_drafting_cost(120);
  for (int r = 0; r < 40; ++r) sim.round(half);
  EXPECT_TRUE(sim.policy().rate_guard().drafting_off(4));
  int drafted = 0;
  constexpr int kRounds = 20000;
  for (int r = 0; r < kRounds; ++r) drafted += drafting(sim.round(half)) > 0;
  // A losing trial (about judge_after rounds, each 120 ms short) waits until
  // trial_share of the plain rounds after it has paid for it: a few trials.
  EXPECT_LE(drafted, kRounds / 100) << "drafting tried again rarely";
  EXPECT_GE(drafted, RateGuardTuning{}.judge_after + 1) << "but tried";
  const double plain = 4 / costs.verify(4);
  EXPECT_GT(sim.rate(), 0.97 * plain) << "the rounds run near the plain rate";
}

// The same batch with nothing hidden: drafting pays as predicted, and the
// guard leaves it on (apart from its plain reference rounds).
TEST(DraftPolicy, RealisedRateAbovePlainKeepsDrafting) {
  const Script half = [](int, size_t, int n) { return n / 2; };
  Simulation sim(4, FakeCosts{40, 2, 8});
  sim.hide_drafting_cost(0);
  int drafted = 0;
  for (int r = 0; r < 400; ++r) drafted += drafting(sim.round(half)) > 0;
  EXPECT_FALSE(sim.policy().rate_guard().drafting_off(4));
  EXPECT_GE(drafted, 380);
  const FakeCosts costs{40, 2, 8};
  EXPECT_GT(sim.rate(), 1.2 * 4 / costs.verify(4));
}

// A trial's start-up, the first drafted rounds of requests that decoded before
// it began (a draft model catching up on all they decoded plainly, a one-off),
// is not judged; a request that arrives during the trial is judged from its
// first drafted round on (every new request's catch-up is a cost that drafting
// keeps paying). Judged, the start-up's catch-ups turned off drafting that won
// at four requests (bench serve, chat prompts).
TEST(DraftPolicy, ATrialsStartUpIsNotJudged) {
  Simulation sim(4, FakeCosts{40, 2, 8}, {}, /*catch_up_ms_per_token=*/1.0);
  sim.hide_drafting_cost(0);  // rounds tell the guard their batch
  const RateGuard& guard = sim.policy().rate_guard();
  // A plain round, one request exploring, then all four drafting: the first
  // two drafted rounds each catch a request up for the first time.
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 0);
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 1);
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 4);
  EXPECT_GT(guard.trial(4), 0);
  EXPECT_EQ(guard.judged_rounds(4), 0) << "start-up rounds";
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 4);
  EXPECT_EQ(guard.judged_rounds(4), 1);
  sim.replace(2);  // a new request takes request 2's place: its round is judged
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 4);
  EXPECT_EQ(guard.judged_rounds(4), 2);
  for (int r = 0; r < 40; ++r) sim.round(kAcceptAll);
  EXPECT_TRUE(guard.judged(4));
  EXPECT_FALSE(guard.drafting_off(4));
}

// A request that arrives after a trial began but before it judged a round
// decodes plain while the trial margin holds drafting back, so its first
// drafted round catches the draft model up on its prompt and all it decoded
// plainly: start-up, like an older request's. Judged, two such catch-ups (206
// and 160 ms rounds against 25 ms plain ones) made a trial at four requests
// dear (bench serve, chat prompts; docs/decisions.md).
TEST(DraftPolicy, ARequestBornInATrialsStartUpIsStartUp) {
  Simulation sim(4, FakeCosts{40, 2, 18}, {}, /*catch_up_ms_per_token=*/0.1);
  sim.hide_drafting_cost(0);
  const RateGuard& guard = sim.policy().rate_guard();
  sim.round(kAcceptAll);  // plain
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 1) << "one request explores: the trial begins";
  EXPECT_GT(guard.trial(4), 0);
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 0) << "a 20% gain is short of the trial margin";
  for (size_t i = 0; i < 4; ++i) sim.replace(i);  // four new requests, all decoding plain
  for (int r = 0; r < 5; ++r) EXPECT_EQ(drafting(sim.round(kAcceptAll)), 0);
  // Plain passes grow dearer (longer contexts), 2 ms a round up to 60: drafting
  // now clears the margin. (At once, 40 to 60 ms is the machine changing speed,
  // which rescales every cost: speculative/speed_shift.h.)
  int r = 0;
  for (double base = 42; drafting(sim.round(kAcceptAll)) == 0 && ++r < 50; base += 2)
    sim.set_costs(FakeCosts{std::min(base, 60.0), 2, 18});
  ASSERT_LT(r, 50) << "drafting began";
  EXPECT_EQ(guard.judged_rounds(4), 0) << "the new requests' first drafted round is start-up";
  EXPECT_GT(drafting(sim.round(kAcceptAll)), 0);
  EXPECT_EQ(guard.judged_rounds(4), 1) << "their next one is steady drafting";
}

// A trial whose start-up is paid (every request of the round has drafted in
// it) plans at batch_margin even before its first judged round: the catch-ups
// are spent whatever comes next, and only the judged rounds are ahead. Here the
// start-up round shows draft steps dearer (20 ms) than the exploring round's
// (8 ms), so that from then on four requests drafting are expected to gain
// between the two margins. Held to the trial margin, the batch decoded plain
// and threw the start-up away (bench serve, copy prompts at two requests;
// docs/decisions.md). The same costs from the start begin no trial.
TEST(DraftPolicy, APaidStartUpDraftsOnAtTheBatchMargin) {
  const FakeCosts cheap{40, 2, 8}, dear{40, 2, 20};
  Simulation sim(4, cheap);
  sim.hide_drafting_cost(0);  // rounds tell the guard their batch
  const RateGuard& guard = sim.policy().rate_guard();
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 0) << "plain";
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 1) << "one request explores";
  sim.set_costs(dear);
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 4) << "the start-up: every request catches up";
  EXPECT_EQ(guard.judged_rounds(4), 0);
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 4) << "the start-up is paid: batch_margin";
  EXPECT_EQ(guard.judged_rounds(4), 1);
  const double before = sim.total_ms();
  const int64_t emitted_before = sim.emitted();
  // The guard asks for its plain reference rounds (a few) along the way.
  int drafted = 0;
  for (int r = 0; r < 20; ++r) drafted += drafting(sim.round(kAcceptAll)) == 4;
  EXPECT_GE(drafted, 16);
  const double plain_rate = 4 / dear.verify(4);  // tokens per ms of a plain round
  EXPECT_GT((sim.emitted() - emitted_before) / (sim.total_ms() - before), 1.1 * plain_rate)
      << "drafting on gains what the cost model expected";

  Simulation from_start(4, dear);
  from_start.round(kAcceptAll);
  EXPECT_EQ(drafting(from_start.round(kAcceptAll)), 1) << "one request explores";
  for (int r = 0; r < 5; ++r)
    EXPECT_EQ(drafting(from_start.round(kAcceptAll)), 0) << "the gain begins no trial";
}

// The guard judges the engine's load (requests decoding and prefilling), not
// the decoding batch: a round that decodes one request short while a new one
// prefills belongs to the full batch's verdict.
TEST(DraftPolicy, TheGuardJudgesTheLoad) {
  Simulation sim(3, FakeCosts{40, 2, 8});
  sim.hide_drafting_cost(0);
  sim.set_load(4);
  for (int r = 0; r < 10; ++r) sim.round(kAcceptAll);
  const RateGuard& guard = sim.policy().rate_guard();
  EXPECT_GT(guard.trial(4), 0);
  EXPECT_GT(guard.plain_rate(4), 0);
  EXPECT_EQ(guard.trial(3), 0) << "no state of its own for the decoding batch";
  EXPECT_EQ(guard.plain_rate(3), 0);
}

// A round short of its load (a request decoding while another one's prompt
// prefills) pays a draft model's catch-up whole: the caught-up cache serves
// that round's drafts only. In a whole batch the same catch-up is spread over
// the tokens the request has left. 400 tokens behind at 1 ms each: spread over
// 1000 tokens it costs under 4 ms a round and drafting pays; whole, a round of
// 8 drafted tokens would cost 13 plain rounds for at most 9 tokens.
TEST(DraftPolicy, ARoundShortOfItsLoadPaysACatchUpWhole) {
  for (int load : {0, 2}) {
    Simulation sim(1, FakeCosts{40, 2, 8}, {}, /*catch_up_ms_per_token=*/1.0);
    sim.set_load(load);
    for (int r = 0; r < 10; ++r) sim.round(kAcceptAll);
    EXPECT_EQ(drafting(sim.round(kAcceptAll)), 1) << "load " << load << ": drafting pays";
    sim.set_missed(0, 400);
    EXPECT_EQ(drafting(sim.round(kAcceptAll)), load == 0 ? 1 : 0)
        << "load " << load << ": 400 ms of catch-up";
  }
}

// A draft model's catch-up is spread over the tokens that the drafting it
// begins delivers (its reach: the drafted rounds until the first plain one, or
// the request's end), not over the tokens the request has left. 400 tokens
// behind at 10 ms each: where requests have drafted to their ends (1000
// tokens), a round of 9 tokens pays 36 ms of it and drafting pays; where each
// catch-up reached one round's 9 tokens (requests that finished after a round,
// here), twenty such reaches and the prior's one of 1000 tokens spread it over
// 110, a round pays 330 ms, and the request decodes plain.
TEST(DraftPolicy, ACatchUpIsPricedByWhatItReaches) {
  for (bool short_reach : {false, true}) {
    Simulation sim(1, FakeCosts{40, 2, 8}, {}, /*catch_up_ms_per_token=*/10.0);
    for (int r = 0; r < 10; ++r) sim.round(kAcceptAll);
    for (int r = 0; r < 20 && short_reach; ++r) {
      sim.replace(0);
      EXPECT_EQ(drafting(sim.round(kAcceptAll)), 1) << "a new request, nothing to catch up on";
    }
    sim.set_missed(0, 400);
    EXPECT_EQ(drafting(sim.round(kAcceptAll)), short_reach ? 0 : 1)
        << (short_reach ? "reaches of 9 tokens" : "reaches to the end");
  }
}

// A catch-up's reach ends with its drafting: the first plain round the cost
// model chooses. Drafting that a probe later resumes was bought by the probe's
// own catch-up (paid from the probe budget), and is no reach. One request drafts
// a round of 9 tokens and a few rejected ones (1 token each), stops, and
// resumes after a probe for 20 rounds: one reach is counted, the first.
TEST(DraftPolicy, ACatchUpReachesUntilItsDraftingStops) {
  Simulation sim(1, FakeCosts{40, 2, 8}, {}, /*catch_up_ms_per_token=*/0.01);
  for (int r = 0; r < 10; ++r) sim.round(kAcceptAll);
  sim.replace(0);  // a new request: the cost model pays its (empty) catch-up
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 1);
  int drafted = 1;
  while (drafting(sim.round(kRejectAll)) > 0 && ++drafted < 100) {
  }
  ASSERT_LT(drafted, 100) << "drafting stopped";
  const double spread = sim.policy().catch_up_reach().spread(1, 1000);
  EXPECT_EQ(spread, (9 + (drafted - 1) + 1000) / 2.0) << "one reach, counted when it stopped";
  int r = 0;
  while (drafting(sim.round(kAcceptAll)) == 0 && ++r < 100) {
  }
  ASSERT_LT(r, 100) << "a probe";
  for (int i = 0; i < 20; ++i) EXPECT_EQ(drafting(sim.round(kAcceptAll)), 1) << "resumed";
  sim.replace(0);
  EXPECT_EQ(sim.policy().catch_up_reach().spread(1, 1000), spread)
      << "the probe's drafting is none";
}

// Only the cost model's own catch-ups are followed to the end of their reach:
// a round that the rate guard keeps plain cuts a reach short without saying
// anything of how long drafting lasts, so it is dropped.
TEST(DraftPolicy, AReachTheGuardCutsIsNotCounted) {
  Simulation sim(1, FakeCosts{40, 2, 8}, {}, /*catch_up_ms_per_token=*/1.0);
  sim.hide_drafting_cost(0);
  for (int r = 0; r < 10; ++r) sim.round(kAcceptAll);
  sim.replace(0);  // its catch-up is the cost model's (the first one was the exploring round's)
  sim.hide_drafting_cost(400);  // drafted rounds lose: the guard turns drafting off
  const RateGuard& guard = sim.policy().rate_guard();
  int r = 0;
  while (!guard.drafting_off(1) && ++r < 200) sim.round(kAcceptAll);
  ASSERT_TRUE(guard.drafting_off(1));
  EXPECT_EQ(drafting(sim.round(kAcceptAll)), 0) << "the guard keeps the round plain";
  sim.replace(0);
  EXPECT_EQ(sim.policy().catch_up_reach().spread(1, 1000), 1000) << "no reach counted";
}

// The machine gets faster mid-run (a host moving its guest to a placement with
// more bandwidth): the passes now cost 1/1.45 of what they did, while the work
// outside them that drafting adds (hidden_ms a drafted round) stays. Drafting
// won at the old speed and loses at the new one. The rate guard's plain
// reference, taken at the old speed, would hold the drafted rounds to plain
// rounds 1.45x slower than they now are until its next refresh; the speed
// shift rescales it within a few rounds and drafting turns off.
namespace {
struct SpeedChange {
  bool drafting_before = false;  // drafting on when the machine changed
  bool off_after = false;        // drafting off within `after` rounds of it
};
SpeedChange run_speed_change(DraftPolicyTuning tuning, int after) {
  const Script half = [](int, size_t, int n) { return n / 2; };
  const FakeCosts slow{58, 2.9, 11.6}, fast{40, 2, 8};
  Simulation sim(4, slow, tuning);
  sim.hide_drafting_cost(70);
  for (int r = 0; r < 40; ++r) sim.round(half);
  SpeedChange out;
  out.drafting_before = !sim.policy().rate_guard().drafting_off(4);
  sim.set_costs(fast);
  for (int r = 0; r < after && !out.off_after; ++r) {
    sim.round(half);
    out.off_after = sim.policy().rate_guard().drafting_off(4);
  }
  return out;
}
}  // namespace

TEST(DraftPolicy, AMachineThatChangesSpeedRescalesWhatWasMeasured) {
  const int after = RateGuardTuning{}.judge_after + 8;  // well before a plain refresh
  ASSERT_LT(after, RateGuardTuning{}.plain_refresh);
  const SpeedChange seen = run_speed_change({}, after);
  EXPECT_TRUE(seen.drafting_before) << "drafting wins at the old speed";
  EXPECT_TRUE(seen.off_after) << "and is found to lose at the new one";
  // The same run without the speed shift (a change of 100x and more only):
  // the stale reference keeps drafting on.
  DraftPolicyTuning blind;
  blind.speed_shift.factor = 100;
  const SpeedChange unseen = run_speed_change(blind, after);
  EXPECT_TRUE(unseen.drafting_before);
  EXPECT_FALSE(unseen.off_after);
}
