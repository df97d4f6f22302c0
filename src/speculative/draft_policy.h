// The draft policy: how many tokens each request drafts in a round, and what the
// engine learns from every round to choose better next time. The speculative
// runner (speculative_runner.h) does the round's mechanics; every decision about
// draft lengths is made here:
//  - plan: fixed K, or adaptive (speculative/adaptive_k.h: the lengths that maximise
//    expected tokens per millisecond from each request's acceptance estimate and
//    the measured costs), with one exploring round to measure costs first;
//  - probes: a request whose drafts stopped paying tries one drafted token now
//    and then, ever more rarely while the probes keep failing, one a round;
//  - the early stop (speculative/draft_stop.h) of a draft model's drafts, and the
//    trimming of free (n-gram) proposals to the part worth verifying;
//  - learning: the costs of verify passes, draft steps and prefill chunks, each
//    request's acceptance, the draft's confidence calibration, the recent rate;
//    all of them rescaled at once when the machine changes speed
//    (speculative/speed_shift.h);
//  - the realised rate (speculative/rate_guard.h): a batch size whose drafted
//    rounds deliver fewer tokens per second than its plain rounds decodes plain,
//    whatever the cost model predicts.
#pragma once
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "speculative/adaptive_k.h"
#include "speculative/catch_up_reach.h"
#include "speculative/draft_context.h"
#include "speculative/draft_stop.h"
#include "speculative/drafter.h"
#include "speculative/rate_guard.h"
#include "speculative/round_plan.h"
#include "speculative/speed_shift.h"

namespace tandem {

constexpr int kMaxDraft = 32;  // the longest draft a round may verify

struct SpecOptions {
  int k = 5;              // draft length; with adaptive, the most it may choose
  bool adaptive = false;  // choose K per round and per request (speculative/adaptive_k.h)
  // With a fixed K: stop drafting for requests whose measured acceptance makes
  // speculation slower than plain decoding, given the batch (they resume when
  // the estimate, which fades back towards its prior, says drafting pays again).
  bool opt_out = true;
  // Draft trees: the most verified positions a request's draft may add beyond
  // its main chain (other candidates at uncertain positions, other lookups);
  // 0: chains only.
  int tree_extra = 0;
  // Judge each batch size's drafted rounds by the tokens/s they deliver against
  // plain rounds (speculative/rate_guard.h); off, the cost model alone decides.
  bool rate_guard = true;
};

// The policy's constants. docs/decisions.md gives the measurements behind them.
struct DraftPolicyTuning {
  RateGuardTuning rate_guard;
  SpeedShiftTuning speed_shift;
  // A request that stopped drafting tries one drafted token after probe_every
  // rounds; each probe after which drafting still does not pay doubles the wait,
  // up to probe_every << max_probe_backoff rounds, so text that stays
  // unpredictable is probed ever more rarely (a probe costs a verified position,
  // and a draft model must first catch up on the tokens it missed).
  int probe_every = 16;
  int max_probe_backoff = 4;
  // Probes are sent only where drafting would pay at this acceptance: when the
  // cost of drafting (a slow draft, a big batch) and not the acceptance stops a
  // request, a probe could not change the decision.
  double probe_alpha = 0.9;
  // Probes are paid from a budget that earns this share of every round's time
  // and is spent on each probe's cost: a draft model's catch-up on the tokens
  // the request decoded without it, plus the verified position. A probe whose
  // cost the budget cannot cover waits. A catch-up costs about what the skipped
  // tokens cost the draft model to prefill, and the waits between probes do not
  // shrink it (it grows with them); so without the budget a draft model's
  // probes in a batch of four cost 5% of the time (bench serve, chat prompts,
  // docs/decisions.md). With it, probing costs at most this share, and nothing
  // changes for free drafters (n-gram, suffix: no catch-up), whose probes cost
  // a position.
  double probe_share = 0.01;
  // The most the budget holds (ms): a long stretch without probes does not buy
  // a burst of them, and a probe dearer than this (a draft model more than
  // ~100 tokens behind) is not sent at all.
  double probe_budget_cap_ms = 250;
  // A draft model's catch-up is spread over the tokens the drafting it begins
  // delivers (speculative/catch_up_reach.h): the mean of what the catch-ups the
  // cost model chose at the same load reached, each keeping this weight per
  // later one (a window of about ten).
  double reach_fade = 0.9;
  // A request's first rounds draft as if its acceptance were at least what the
  // requests before it saw (all verdicts pooled, once this many drafts were
  // judged; probe_alpha before that) until this many of its own drafts were
  // judged: one rejection on the first token says little, and must not stop
  // drafting until the next probe. The pooled figure, not a hopeful constant:
  // a batch of new requests all read at probe_alpha can look worth drafting
  // where the text they continue is accepted far less often.
  double min_judged = 8;
  // The round that first measures a draft step drafts this many tokens (or the
  // cap, if lower) for one request: enough to time steady draft steps and a
  // verify pass over a few positions; beyond them the cost model extrapolates.
  // One request only: all requests drafting at once before any cost is known
  // can be a verify pass as long as many plain rounds.
  int explore_draft = 4;
  // Each request's acceptance estimate keeps this weight per judged draft (a
  // window of about 30): a short window reads a few unlucky rounds as a change
  // of text and stops drafting where acceptance is high on the whole.
  double acceptance_fade = 0.97;
  // The recent rate (tokens and milliseconds of the last rounds) fades by this
  // per round: a window of about ten rounds.
  double recent_fade = 0.9;
  // A batch of several requests drafts only where the cost model expects it to
  // beat plain decoding by this factor: a plain batch already keeps the cores
  // busy, the gain there is thin, and the model's errors (noisy timings, an
  // acceptance estimate that lags the text) decide the sign of a thin gain.
  double batch_margin = 0.1;
  // ... and by this factor for a round that would begin a trial at its load,
  // or belongs to a trial's start-up (before its first judged round, while a
  // request of the round has not yet drafted in the trial): whatever
  // the verdict, the trial pays a draft model's catch-up on every request and
  // the rounds until it is judged, on an expectation that rests on little (the
  // acceptance of one exploring round; verify costs extrapolated from two
  // points). At four requests on the copy set, a trial that the model expected
  // to gain just over 10% drafted at 0.85-0.9x plain and cost 0.8 s of a 10 s
  // run in catch-ups and judged rounds (0.91x; docs/decisions.md).
  double trial_margin = 0.25;
  // Prefill chunks of at least this many tokens are compute-bound: their cost
  // per position bounds what each further verified position costs.
  int prefill_sample = 32;
  // Draft trees with -k auto: a node beside a main chain is verified when the
  // tokens such nodes have added per node (a faded average, starting from
  // tree_prior_yield worth tree_prior_nodes nodes) pay for the position at the
  // recent rate. Where they do not, one round in tree_probe_every still
  // verifies a tree, so that the estimate can recover.
  double tree_prior_yield = 0.2;
  double tree_prior_nodes = 4;
  double tree_fade = 0.97;
  int tree_probe_every = 16;
};

// Measurements of one finished round.
struct RoundCosts {
  int positions = 0;     // positions the verify pass fed
  double verify_ms = 0;  // that pass alone
  int drafting = 0;      // requests that were to draft
  double step_ms = -1;   // a steady draft step (negative: none measured)
  int emitted = 0;       // tokens the round emitted, all requests together
  double total_ms = 0;   // the whole round
  int requests = 0;      // the round's load (RoundPlan::guard_load); 0: the guard skips it
  int drafted = 0;       // drafted tokens verified, all requests together
  int decoding = 0;      // requests the round decoded (0: its whole load)
};

class DraftPolicy {
 public:
  // drafter may be null (plain decoding: every length is 0).
  DraftPolicy(const Drafter* drafter, SpecOptions opt, DraftPolicyTuning tuning = {});

  // The round's plan: each request's draft length (0: a plain decode step),
  // within its room and K, and the cache positions its drafts may take (the
  // main chain, and with trees up to tree_extra more within its kv_room). Where
  // `budget` (the engine's KV room; null: unbounded) cannot hold the drafts,
  // the round drafts nothing. Counts the probes of requests that stopped
  // drafting.
  // plan.requests are the round's requests; k and positions are written (their
  // buffers reused: planning round after round allocates nothing).
  void plan(RoundPlan& plan, const KvBudget* budget = nullptr);
  // The same for a list of requests, returning the plan (tests).
  RoundPlan plan(std::vector<RoundRequest> round, const KvBudget* budget = nullptr);
  // With -k auto and a drafter that drafts step by step: the rule that stops
  // each request's draft when one more token no longer pays (null: none yet).
  // Valid until the next round's.
  const CostAwareStop* draft_stop(const RoundPlan& plan);
  // After drafting: free proposals are cut to the part worth verifying (probes
  // included), deterministic drafts lose trailing tokens `stop` says cost more
  // to verify than they add, and trees keep their main chain (at most k[i]) and
  // at most positions[i] - k[i] other nodes, the first ones (a cut that depends
  // on no drawn token, so sampled trees stay exact).
  void trim(const RoundPlan& plan, std::vector<Draft>& drafts, const CostAwareStop* stop);

  // Learning from what happened.
  void record_prefill(int tokens, double ms);
  // One request's round: `draft` as verified, its first `accepted` tokens kept.
  void record_verdict(int id, const Draft& draft, int accepted);
  // A tree's round: `nodes` verified beside its main chain, `gained` tokens
  // accepted off the main chain (beyond what the chain alone gave).
  void record_tree(int nodes, int gained);
  void record_round(const RoundCosts& round);
  // The request finished: drop its state.
  void forget(int id);

  // Whether the costs a plan for a batch of this many requests rests on are
  // measured (the exploring rounds behind it): from then on its plans follow
  // the measurements alone. Benchmarks warm up until it is.
  bool explored(int batch) const;

  const CostModel& costs() const { return costs_; }
  const RateGuard& rate_guard() const { return guard_; }
  const CatchUpReach& catch_up_reach() const { return reach_; }
  // Changes of the machine's speed seen so far (each rescaled every cost).
  int speed_shifts() const { return speed_shifts_; }
  const SpecOptions& options() const { return opt_; }
  const DraftPolicyTuning& tuning() const { return tuning_; }
  // A request's acceptance estimate (its prior before any verdict).
  double acceptance(int id) const;

 private:
  struct RequestState {
    AcceptanceEstimate acceptance;
    int rounds_since_draft = 0;  // decode rounds since it last had drafts verified
    int failed_probes = 0;       // probes in a row after which drafting still did not pay
    // The rate guard's trial (RateGuard::trial) at the request's first plan if
    // that trial had judged a round then (0 otherwise), and the trial at the
    // last round it drafted in: whether its drafting now catches a draft model
    // up on text from before the current trial's steady drafting.
    int born_in_trial = 0;
    int drafted_in_trial = 0;
    // Whether its last plan drafted; the reach (CatchUpReach) of a catch-up
    // the cost model chose to pay for it: whether one is being counted (its
    // drafting goes on), at which load, and the tokens emitted since.
    bool drafted_last = false, reaching = false;
    int reach_load = 0, reach_tokens = 0;
  };
  RequestState& state(int id);
  // The acceptance a request with little evidence of its own is read at least at.
  double new_request_alpha() const;
  int cap(const RoundRequest& r) const;
  // Whether the rate guard has a say (-k auto, or a fixed K with opt-out).
  bool guarded() const { return drafter_ && opt_.rate_guard && (opt_.adaptive || opt_.opt_out); }
  // The lengths a plan chooses among: K, or with -k auto 1..K.
  std::vector<int> k_choices_;
  bool stops_early() const;
  // What drafting must gain over plain decoding in this round, at the load of
  // the round being planned.
  double margin(std::span<const RoundRequest> round) const;
  // Whether every request of the round has drafted in the current trial at the
  // load being planned: the trial's start-up (each draft model's catch-up) is
  // paid, and what is left of its cost is the judged rounds themselves.
  bool start_up_paid(std::span<const RoundRequest> round) const;
  // The drafter's catch-up cost for a request: measured rate, or the prior.
  double catch_up_ms(const DraftContext& ctx) const;
  // Whether the plan's drafting includes its trial's start-up (a draft model
  // first catching up a request that was decoding before the trial began),
  // for the rate guard; marks its drafting requests as drafting in the trial.
  bool starts_up(const RoundPlan& p);
  // Follows the catch-ups' reaches by the final plan: a request that drafts
  // after a plain round by the cost model's choice pays a catch-up, and its
  // reach begins; it ends at the request's next plain round. `refused`: the
  // rate guard or the KV room, not the cost model, kept the round plain; a
  // reach cut so says nothing of how far the cost model's catch-ups reach, and
  // is dropped.
  void track_reaches(const RoundPlan& p, bool refused);
  void end_reach(RequestState& st);
  // Whether the round decodes fewer requests than its load (see draft_lengths).
  bool short_of_load(std::span<const RoundRequest> round) const {
    return load_ > static_cast<int>(round.size());
  }
  // Draft lengths for this round into k (the first part of plan()).
  void draft_lengths(std::span<const RoundRequest> round, std::vector<int>& k);
  // The positions a request's drafts may take when its main chain has k tokens:
  // k, and with trees up to tree_extra more within `room` (positions it may write).
  int position_budget(int room, int k) const;
  // After the lengths for `batch` are chosen: a request that stopped drafting
  // gets a one-token probe now and then (see DraftPolicyTuning::probe_every).
  void add_probes(std::span<const RoundRequest> round, const std::vector<DraftCandidate>& batch,
                  std::vector<int>& k);
  // choose_draft_lengths into out, with the policy's scratch.
  void choose(std::span<const DraftCandidate> batch, CostModel::Reading reading, double margin,
              std::vector<int>& out);

  const Drafter* drafter_;
  const DraftCostHints* hints_;
  SpecOptions opt_;
  DraftPolicyTuning tuning_;
  CostModel costs_;
  RateGuard guard_;
  SpeedShift speed_shift_;
  int speed_shifts_ = 0;
  ConfidenceCalibration calibration_;
  std::unordered_map<int, RequestState> requests_;
  AcceptanceEstimate pooled_;  // every request's verdicts together
  CatchUpReach reach_;
  // Tokens emitted and milliseconds spent by recent rounds (fading sums): the
  // rate a drafted token's cost is weighed against.
  double recent_tokens_ = 0, recent_ms_ = 0;
  double probe_budget_ms_ = 0;  // see DraftPolicyTuning::probe_share
  bool start_up_ = false;       // the last plan's starts_up(), for record_round
  // Whether the last plan's lengths are the cost model's choice (not the
  // exploring round's, nor the caps themselves), and the request its probe
  // went to (-1: none): the drafts the cost model chose are the others.
  bool cost_model_chose_ = false;
  int probed_ = -1;
  int load_ = 0;  // the load of the round being planned (RoundPlan::guard_load)
  // Nodes beside main chains: verified, and the tokens they added (fading sums).
  double tree_nodes_ = 0, tree_gained_ = 0;
  int rounds_since_tree_ = 0;
  // How many nodes beside its main chain each request may keep this round (into extra_).
  void tree_extras(const RoundPlan& plan, const std::vector<Draft>& drafts);
  // Scratch, kept from round to round.
  std::vector<DraftCandidate> batch_, hopeful_;
  std::vector<int> order_, probe_k_, keep_, extra_, room_;
  std::vector<double> next_alpha_;
  CostAwareStop stop_;
};

}  // namespace tandem
