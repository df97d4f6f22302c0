// Adaptive draft length. Each round picks the draft lengths that maximise the
// expected tokens per second of the whole batch:
//   tokens = sum over requests of (1 - a_i^(K_i+1)) / (1 - a_i)   (Leviathan et al., 2023)
//   time   = max_i K_i * draft_step(batch) + verify(total positions)
//            + each drafting request's share of its one-off catch-up cost
// from each request's running acceptance estimate a_i and the measured costs of
// a draft step and of a target forward over that many positions. K = 0 is plain
// decoding, so a request whose drafts do not pay (or a batch already big enough
// to keep the machine busy) simply stops drafting.
#pragma once
#include <array>
#include <span>
#include <utility>
#include <vector>

namespace tandem {

// A measured cost as it runs: the median of the last kWindow measurements (the
// first one alone until more come). Costs drift with the machine's load, and a
// shared machine also stalls now and then: a burst of three passes at two to
// three times their cost raised a running average (each measurement moving it a
// fifth of the way) by a quarter, and the policy, reading the pass dearer,
// stopped choosing it, so nothing measured it again and the rest of the run
// drafted one token where two paid (docs/decisions.md, "Costs are medians").
// A median passes over up to three such measurements in seven and follows a
// lasting change after four.
class RunningCost {
 public:
  void add(double ms);
  double ms() const { return median_; }   // 0 until measured
  int samples() const { return count_; }  // measurements in the window
  // Every measurement times f (the machine changed speed: SpeedShift).
  void scale(double f);

 private:
  static constexpr int kWindow = 7;
  std::array<double, kWindow> recent_{};
  int count_ = 0;  // measurements so far, up to kWindow
  int next_ = 0;   // where the next one goes
  double median_ = 0;
};

// Measured wall-clock costs of the forward passes, in milliseconds.
class CostModel {
 public:
  CostModel();
  // One target forward over `positions` (decode steps and verify passes).
  void record_verify(int positions, double ms);
  // One draft step for `batch` requests (a batched draft-model forward, or a lookup).
  void record_draft_step(int batch, double ms);
  // A target prefill chunk of `tokens` positions (compute-bound: its cost per
  // position is what each further verified position costs at least, once the
  // weights' streaming is paid for).
  void record_prefill(int tokens, double ms);
  // Estimated cost of a target forward over m positions: measured points, linear
  // between them, extrapolated beyond the largest with the fitted slope but
  // never less than prefill's cost per position (a slope fitted to two noisy
  // decode points can be flat, which would make long drafts look free).
  // Read hopefully, without that floor: flat beyond a single measured point.
  enum class Reading { Floored, Hopeful };
  double verify_ms(int m, Reading reading = Reading::Floored) const;
  // A draft step for `batch` requests: measured (with one batch size measured,
  // a larger batch scaled as the target's pass over as many positions), or
  // before any measurement the prior (set_draft_prior) times the target's cost
  // for as many positions.
  double draft_step_ms(int batch) const;
  // A draft step's cost relative to a target pass over as many positions,
  // assumed until a draft step is measured (0: none, drafting looks free).
  void set_draft_prior(double relative) { draft_prior_ = relative; }
  // A draft model catching up on `tokens` before its catch-up rate is measured:
  // a prefill, priced like the target's at the prior (0 until a long chunk of
  // the target's prefill was measured).
  double draft_catch_up_prior_ms(int tokens) const {
    return tokens * draft_prior_ * prefill_per_token_.ms();
  }
  // What a verified position adds on average over the measured range (the
  // slope from the fewest to the most positions measured; 0 below two points).
  double mean_position_ms() const;
  // Distinct position counts measured so far; whether m positions were.
  int verify_points() const { return static_cast<int>(verify_.size()); }
  bool has_verify(int m) const;
  bool has_draft_step() const { return !draft_.empty(); }
  // The median of the passes over exactly m positions, once three were
  // measured (0 before): what the next such pass should cost.
  double own_verify_ms(int m) const;
  // Every cost measured so far times f: the machine changed speed
  // (speculative/speed_shift.h), and each pass, draft step and prefill chunk
  // now costs f times what it did.
  void rescale(double f);

 private:
  // Measured points, sorted by count: flat, with room for the counts a server
  // meets, so that recording allocates nothing after them. A point is read as
  // the cheapest of its own cost and every larger count's (`ms`): a pass over
  // fewer positions (a draft step for fewer requests) streams the same weights
  // for fewer rows and never costs more. Each count's running cost follows
  // only the rounds of that count, and the count a batch decodes plainly is
  // measured only while it decodes plainly: once it drafts, a plain point that
  // a burst of slow rounds had raised stays raised (35 ms against 27-29 for
  // four requests on two cores, bench serve, chat prompts), and every drafted
  // plan looks a quarter better than it is (docs/decisions.md, "A pass over
  // fewer positions never reads dearer").
  struct Point {
    int count;
    RunningCost cost;  // this count's own measurements
    double ms = 0;     // the reading: the least of cost and every larger count's
  };
  using Points = std::vector<Point>;
  // The first point of count m or more.
  static Points::const_iterator first_at_least(const Points& points, int m);
  // The point of exactly m positions, or null.
  const Point* verify_point(int m) const;
  static void record(Points& points, int m, double ms);
  static double estimate(const Points& points, int m, double min_slope = 0);
  Points verify_;  // the cost per position count
  Points draft_;   // a draft step's cost per batch size
  RunningCost prefill_per_token_;
  double draft_prior_ = 0;
};

// Running estimate of the probability that the target accepts a drafted token.
// Each verified draft is a Bernoulli trial until the first rejection; drafts
// after a rejection were never judged and do not count. Older drafts fade so
// the estimate follows the text (a copy passage, then free prose); rounds
// without drafts leave it as it is.
class AcceptanceEstimate {
 public:
  // fade: the weight old evidence keeps per update; the prior counts as
  // prior_accepted acceptances in prior_judged trials.
  explicit AcceptanceEstimate(double fade = 0.9, double prior_accepted = 2, double prior_judged = 3)
      : fade_(fade), prior_accepted_(prior_accepted), prior_judged_(prior_judged) {}
  void update(int accepted, bool rejected);
  double alpha() const;
  // Drafts judged so far (faded like the evidence): how much alpha rests on.
  double judged() const { return judged_; }

 private:
  double fade_, prior_accepted_, prior_judged_;
  double accepted_ = 0, judged_ = 0;
};

// Expected tokens per round for acceptance a and draft length k.
double expected_tokens(double alpha, int k);

struct DraftCandidate {
  double alpha;  // the request's acceptance estimate
  int pending;   // tokens the round feeds besides drafts (usually 1)
  int cap;       // the most it may draft this round (token limit, context)
  // One-off cost (ms) of drafting for it at all: a draft model's catch-up on the
  // tokens its cache lacks (the whole prompt on the first round). A round that
  // drafts pays its share of it: expected tokens / catch_up_spread.
  double catch_up_ms = 0;
  // Tokens the catch-up is spread over: those the drafting it begins is
  // expected to deliver (CatchUpReach, speculative/catch_up_reach.h), or 1
  // where the round pays it whole.
  int catch_up_spread = 1;
};
// Draft lengths for a batch: K from `k_choices` (0 is always considered) for the
// j requests with the highest acceptance, 0 for the rest, maximising expected
// tokens per millisecond, verify passes read as `reading` says. Returns one
// length per candidate.
// A plan that drafts must beat plain decoding by the factor 1 + margin.
std::vector<int> choose_draft_lengths(const std::vector<DraftCandidate>& batch,
                                      const std::vector<int>& k_choices, const CostModel& costs,
                                      CostModel::Reading reading = CostModel::Reading::Floored,
                                      double margin = 0);
// The same into `out` (one length per candidate), with `order` as scratch: no
// allocation once they have grown.
void choose_draft_lengths(std::span<const DraftCandidate> batch, std::span<const int> k_choices,
                          const CostModel& costs, CostModel::Reading reading, double margin,
                          std::span<int> out, std::vector<int>& order);

}  // namespace tandem
