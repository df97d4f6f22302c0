// `bench membw` and `bench decode`: how long a cache line takes to go from one
// pool thread to the other and back. On the lent machines the host places the
// two vCPUs either on one core complex (shared L3: 43-69 ns) or on two
// (352-392 ns, and about 1.5x the streaming bandwidth): the two "states" the
// benchmarks meet. Every parallel region and every value one thread computes
// for the other crosses that path, so a figure taken in one state says little
// about the other; the round trip names the state beside the figure
// (docs/benchmarks.md, "The host's two states are two placements").
#pragma once
#include <optional>

#include "core/thread_pool.h"

namespace tandem::cli {

// Median round trip, in nanoseconds, of one cache line passed between the
// pool's threads 0 and 1 (a counter each increments in turn), over batches of
// `round_trips`; nullopt with one thread, or when the second thread did not
// join the region within 100 ms (a host that descheduled it). Its waits give the
// core away after a while (spin_wait_step), so one CPU for two threads gives a
// large reading rather than a timeslice a round trip.
std::optional<double> measure_handoff_ns(ThreadPool& pool, int round_trips = 1000, int batches = 5);

}  // namespace tandem::cli
