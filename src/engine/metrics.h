// Engine counters for monitoring (the server's /metrics): cumulative counts,
// current gauges and latency histograms, copied out as one consistent snapshot.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cache/kv_cache.h"

namespace tandem {

// A Prometheus-style cumulative histogram: counts[i] observations <= bounds[i],
// the last entry (+Inf) all of them.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // bounds.size() + 1, cumulative
  double sum = 0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> upper_bounds = {});
  void observe(double v);
};

struct EngineMetrics {
  std::map<std::string, uint64_t> requests;  // finished, by finish reason
  uint64_t prompt_tokens = 0;                // prompt tokens of admitted requests
  uint64_t generated_tokens = 0;
  uint64_t drafted_tokens = 0, accepted_tokens = 0;
  uint64_t preemptions = 0;
  // The prefix cache at admission: prompt tokens looked up, and found (their
  // prefill skipped). Counted once per admission, not per attempt: a request
  // that waits for room is looked up again at each step.
  uint64_t prefix_queried_tokens = 0, prefix_hit_tokens = 0;
  Histogram tokens_per_round{{1, 2, 3, 4, 5, 6, 8, 10, 13, 17}};
  Histogram time_to_first_token{{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram inter_token_latency{{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5}};
  int queued = 0, running = 0;
  KVCache::Stats kv;        // the target's cache
  KVCache::Stats draft_kv;  // the draft model's cache (zeros without one)
};

}  // namespace tandem
