// The last word on whether a batch drafts: what rounds of that batch size
// actually delivered. The cost model (adaptive_k.h) predicts a drafted round's
// rate from measured pass costs and acceptance estimates; whatever it misses
// (sampling and rollback work per verified position, a draft model's catch-up,
// cache traffic that grows with the batch, a busy machine) shows only in the
// realised rate. Per batch size, this guard keeps the tokens per millisecond of
// recent plain rounds and what recent drafted rounds delivered against them;
// where drafted rounds fall below plain, that batch size decodes plain, and
// tries drafting again only rarely (ever more rarely while the tries keep
// losing); a trial that has so far gained more than it lost is only paused
// (RateGuardTuning::in_credit_wait).
//
// A drafted round is held to plain rounds that decoded as many requests as it
// did. A load's rounds do not all decode the whole load: while a new request
// prefills, its batch decodes one short, and such a plain round delivers about
// a fifth less at four requests (2 cores, the 1.5B: 0.118 tokens/ms at three
// decoding, 0.150 at four; docs/decisions.md). Where the drafting rounds are
// the whole batch's and the plain rounds among them are mostly those short
// ones, one plain reference for the load reads low, and drafted rounds that
// lose 12% read as a 10% win.
#pragma once
#include <vector>

namespace tandem {

struct RateGuardTuning {
  // Each round's tokens and milliseconds keep this weight per later round of
  // the same kind and batch size: a window of about ten rounds, long enough to
  // average acceptance's ups and downs, short enough to follow the text.
  double fade = 0.9;
  // Drafted rounds (after a trial's start-up) before a verdict: fewer would judge
  // a few lucky or unlucky rounds (at 8, a busy machine turned drafting off at
  // one request, where it gains 1.4x, in two of three bench serve levels). A
  // trial's cost is bounded by trial_share, so a longer one is affordable.
  int judge_after = 16;
  // Drafted rounds lose when they deliver less than this share of the plain
  // rate: a hair's difference is noise (and 0.98x is the promise), not a reason
  // to stop.
  double keep_above = 0.98;
  // Plain rounds of a batch size wanted as the reference; a batch size that
  // drafts from its first round takes this many plain rounds once.
  int plain_reference = 3;
  // While drafting, refresh_rounds plain rounds after this many drafted rounds
  // keep the reference current: rounds that decode as many requests as the
  // drafted ones (the whole batch, unless a request is always prefilling).
  // The reference's rounds fade with every round of the batch size, drafted or
  // plain, so a refresh all but replaces it: a plain step slows as contexts
  // grow, and a reference taken in a slow stretch just before drafting began
  // (0.126 tokens/ms at four requests against 0.18 measured later, bench
  // serve, chat prompts) held 73 drafted rounds at 0.86x plain to read
  // 1.03-1.16x while one plain round in 64 moved it a tenth of the way
  // (docs/decisions.md, "A plain reference that ages").
  int plain_refresh = 64;
  int refresh_rounds = 2;
  // A batch size that decodes plain tries drafting again after this many of
  // its rounds, doubling the wait after each trial that loses, up to
  // retry_after << max_backoff rounds.
  int retry_after = 64;
  int max_backoff = 4;
  // A trial that loses costs what its judged rounds fell short of the plain
  // rate. The wait before the next trial is at least that cost over this share
  // of a plain round, so that trials that lose by much (a batch where drafting
  // cannot pay, new requests' catch-ups in every other round) take at most
  // this share of the time; a trial that lost by a hair (a stretch of hard
  // text at one request, where drafting wins 1.4x on the whole) keeps the
  // schedule's short wait. The cost includes the trial's start-up (record()):
  // a trial at eight requests first catches the draft model up on all eight
  // (40-110 ms each for chat prompts on two cores, against 35-60 ms plain
  // rounds), and left out, a losing trial could come back every 64 rounds.
  // It is the whole trial's, from its start-up to its loss, the rounds that
  // beat plain netted against those that fell short: a verdict to keep
  // drafting on the way forgives none of it.
  double trial_share = 0.01;
  // A loss verdict on a trial still in credit (its rounds so far, start-up
  // included, delivered more than plain rounds would have in their time) is a
  // dip of the recent rounds, not yet a loss: the batch size decodes plain for
  // this many rounds and tries again with the credit carried over, without
  // counting a failed trial. The verdict reads a window of about ten drafted
  // rounds, whose tokens at one request vary by a third or more round to
  // round: a window of hard text falls below keep_above now and then where
  // drafting gains 1.4x on the whole (docs/decisions.md, "A trial in credit":
  // a simulation of one request's rounds, and a bench serve rep at 1.25x
  // against 1.38-1.40x that drafted in about half its rounds). Losses that
  // persist eat the credit, so flip-flopping costs at most what the trial had
  // gained; then the schedule above applies.
  int in_credit_wait = 8;
};

// `batch` below is whatever the policy keys its verdicts by: the engine's load
// (RoundPlan::guard_load), requests decoding and prefilling.
class RateGuard {
 public:
  explicit RateGuard(RateGuardTuning tuning = {}) : tuning_(tuning) {}

  // Whether a round of `batch` requests that the policy would have draft may
  // draft. Called once per such round: it counts the rounds a batch size has
  // decoded plain towards its next trial.
  bool allows(int batch);
  // The trial `batch` is in: a number no other trial of any batch size has,
  // given when it begins (its first allowed round, and each retry after a
  // loss); 0 before its first.
  int trial(int batch) const;
  // A finished decode round of `batch` requests, `decoding` of them decoding
  // (0: all; the others' prompts still prefilling): whether it verified drafted
  // tokens, the tokens it emitted, and its milliseconds. A drafted round that
  // is part of its trial's start-up (`start_up`: a draft model first catching
  // up on text it skipped before the trial began, a one-off that every trial
  // pays and steady drafting does not) is charged to the trial's cost but not
  // judged: judged, at four requests the catch-ups turned off drafting that,
  // judged without them, gains 1.08x there (docs/decisions.md).
  void record(int batch, bool drafted, int emitted, double ms, bool start_up = false,
              int decoding = 0);

  // The machine changed speed by f (speculative/speed_shift.h): every round
  // recorded so far, plain or drafted, at every batch size, now takes f times
  // its milliseconds. The verdicts hold rounds to rates of the same machine.
  void rescale(double f);

  // Whether `batch` requests decode plain because drafting lost there.
  bool drafting_off(int batch) const;
  // Whether drafting at `batch` has had its verdict (off, or judged on enough
  // drafted rounds against the plain reference).
  bool judged(int batch) const;
  // Drafted rounds judged in the current trial at `batch` (its start-up not counted).
  int judged_rounds(int batch) const;
  // Realised tokens per millisecond at `batch`, of plain rounds decoding `decoding`
  // requests (0: all of them) and of drafted rounds (0: not measured).
  double plain_rate(int batch, int decoding = 0) const;
  double drafted_rate(int batch) const;
  // What drafted rounds at `batch` delivered over what plain rounds decoding as
  // many requests would have in their time (0: not measured): the verdict's figure.
  double drafted_over_plain(int batch) const;

 private:
  struct Faded {
    double tokens = 0, ms = 0;
    void add(double fade, int t, double m) {
      tokens = fade * tokens + t;
      ms = fade * ms + m;
    }
    double rate() const { return ms > 0 ? tokens / ms : 0; }
  };
  struct BatchState {
    // Rounds by the requests they decoded (index: 1..batch size). Drafted
    // rounds all fade together, whatever they decoded: their window is the
    // last rounds of the trial.
    std::vector<Faded> plain, drafted;
    int plain_rounds = 0;      // plain rounds recorded (all time)
    int drafted_rounds = 0;    // drafted rounds judged in this trial
    int trial = 0;             // this trial's number (0: none begun)
    int since_plain = 0;       // drafted rounds since the last plain one that refreshes
    int refresh_left = 0;      // plain rounds the refresh still wants
    int drafted_decoding = 0;  // the requests the last drafted round decoded (0: none yet)
    bool off = false;          // decoding plain: drafting lost here
    int rounds_off = 0;        // rounds since it turned off
    int wait = 0;              // rounds off before the next trial
    int failed_trials = 0;     // trials in a row that lost
    double trial_cost_ms = 0;  // this trial's shortfall against the plain rate, gains netted
  };
  // Enough rounds of both kinds for a verdict: judge_after judged drafted
  // rounds, and the plain reference.
  bool has_evidence(const BatchState& s) const {
    return s.drafted_rounds >= tuning_.judge_after && s.plain_rounds >= tuning_.plain_reference;
  }
  // The plain rate for rounds of `batch` that decode `decoding` requests: their
  // own, or (not yet measured) the nearest measured count's scaled by the
  // requests, a plain step costing about the same at a few more or fewer (it
  // reads the weights once for all of them); 0 before any plain round.
  static double plain_rate(const BatchState& s, int decoding);
  // The requests a round of `batch` decoded, as its index: `decoding`, or
  // (0, or more than the batch) all of them.
  static int decoded(int batch, int decoding) {
    return decoding <= 0 || decoding > batch ? batch : decoding;
  }
  static double drafted_rate(const BatchState& s);
  static double drafted_over_plain(const BatchState& s);
  BatchState& state(int batch);
  const BatchState* find(int batch) const;
  RateGuardTuning tuning_;
  std::vector<BatchState> by_batch_;  // index: batch size
  int trials_ = 0;                    // trials begun, all batch sizes
};

}  // namespace tandem
