// Whether the machine itself changed speed: every pass at once, not one pass
// at one load. A shared host moves its guests between placements (on the AMD
// EPYC of these sessions, one core complex read 52 GB/s and two 77 GB/s, and
// a decode step of the 1.5B took 24 ms in the first and 16.5 in the second),
// and busy neighbours take bandwidth for seconds at a time. Every cost the draft
// policy measured before such a change is then off by the same factor. The
// cost medians follow a count only as rounds of that count come again, and the
// rate guard's plain reference only at its next refresh: in between, drafted
// rounds after a change to the faster placement were held to a reference of the
// slower one, and drafting that lost to plain read as a win (bench serve, code
// prompts at four requests: 0.974x in the rep where the host moved;
// docs/decisions.md, "A machine that changes speed").
//
// The signal is the verify pass: a pass over m positions costs what the last
// passes over m cost, whatever the text. Rounds whose pass ran `factor` or more
// away from that median, `rounds` in a row and on the same side, are a change
// of speed; their mean ratio is its size, and the caller rescales what it
// measured before. A rescale moves every cost by one factor, so it changes no
// comparison among them by itself (which drafts pay, drafted rounds against
// plain ones): only rounds measured after it, at the new speed, meet costs of
// the same speed.
#pragma once

namespace tandem {

struct SpeedShiftTuning {
  // A pass 1.15x its median (or 1/1.15) is off. A placement change moved
  // passes 1.2-1.5x (four requests: 23.2 to 19.0 ms a round, one: 23 to 15.4).
  double factor = 1.15;
  // Rounds in a row: four, where a count's median of seven follows a lasting
  // change by itself (the fourth still meets the old median). A shift is then
  // what the medians already conclude for one count, carried to every count
  // and to the rate guard at once. Three would also take the host's shorter
  // bursts (a trace of bench serve, code prompts, one request, a busy host:
  // passes at 1.71, 1.45, 1.49x their medians and then back; runs of three at
  // 1.15x in 11 places of 1954 rounds, of four in 3; docs/decisions.md).
  int rounds = 4;
};

class SpeedShift {
 public:
  explicit SpeedShift(SpeedShiftTuning tuning = {}) : tuning_(tuning) {}
  // One pass's cost over the median of the passes of its count before it (0:
  // no median yet, which neither extends nor breaks a run). Returns the factor
  // by which every earlier cost should be scaled (1: no change seen).
  double observe(double ratio);

 private:
  SpeedShiftTuning tuning_;
  int run_ = 0;         // off rounds in a row, on one side
  int side_ = 0;        // +1: slower, -1: faster
  double log_sum_ = 0;  // their log ratios, summed
};

}  // namespace tandem
