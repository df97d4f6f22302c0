// What a draft model's catch-up buys. A request that decoded plain for a while
// first catches the draft model up on everything it skipped (its whole prompt
// on its first drafted round); the cost model spreads that one-off cost over
// the tokens the drafting it begins will deliver. The catch-up's reach is the
// tokens its request emits in the drafted rounds that follow it, up to the
// first round the cost model decodes it plain, or the request's end. Drafting
// that a probe resumes later is no reach: the probe pays its own catch-up (on
// what the request decoded plain since), from the probe budget. Read as the
// tokens the request has left, as if it will draft to its end, the price is
// right at one request; at four on chat prompts, requests read on little
// evidence drafted one round (250-340 ms of catch-up against 25 ms plain
// rounds) and stopped; at two on code, a batch that stopped drafting for a
// stretch of hard text and came back paid a 201 ms catch-up for 4 tokens, and
// the rate guard turned drafting off for 520 rounds (docs/decisions.md, "A
// catch-up priced by what it reaches"). Per load (RoundPlan::guard_load): how
// long drafting lasts depends on the batch it competes with.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace tandem {

class CatchUpReach {
 public:
  // fade: the weight each reach keeps per later one at the same load. Room for
  // loads up to kLoads is made now: recording in the rounds allocates nothing
  // (a larger load grows it once).
  explicit CatchUpReach(double fade) : fade_(fade) { by_load_.reserve(kLoads + 1); }

  // A catch-up's drafting at `load` emitted `tokens` before it stopped.
  void record(int load, int tokens) {
    if (load <= 0 || tokens < 0) return;
    const size_t l = static_cast<size_t>(load);
    if (l >= by_load_.size()) by_load_.resize(l + 1);
    Faded& f = by_load_[l];
    f.tokens = fade_ * f.tokens + tokens;
    f.reaches = fade_ * f.reaches + 1;
  }
  // The tokens a catch-up at `load` is spread over, for a request with
  // `remaining` tokens left: the mean of the reaches measured there, with one
  // more that runs to the request's end (so that no single reach sets the
  // price, and none measured leaves it as it was), never more than it has left.
  double spread(int load, int remaining) const {
    const size_t l = static_cast<size_t>(load);
    const Faded f = load > 0 && l < by_load_.size() ? by_load_[l] : Faded{};
    return std::min<double>(remaining, (f.tokens + remaining) / (f.reaches + 1));
  }

 private:
  struct Faded {
    double tokens = 0, reaches = 0;
  };
  static constexpr size_t kLoads = 64;
  double fade_;
  std::vector<Faded> by_load_;  // index: load
};

}  // namespace tandem
