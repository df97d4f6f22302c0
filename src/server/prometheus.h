// GET /metrics: the engine's counters and the server's own in Prometheus text
// exposition format (version 0.0.4). Names start with "tandem_"; counters end
// in "_total"; latencies are in seconds.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "engine/metrics.h"

namespace tandem::server {

// What the HTTP layer counts itself.
struct ServerCounters {
  // Requests refused before reaching the engine, by reason: "invalid" (400),
  // "model_not_found", "queue_full", "shutting_down", "too_large", "other".
  std::map<std::string, uint64_t> rejected;
  uint64_t client_disconnects = 0;  // requests cancelled because their client went away
  int64_t http_in_flight = 0;       // generation requests an HTTP handler is serving
  int64_t heap_bytes_in_use = -1;   // heap_usage.h, read at the scrape; -1: unknown
};

// What /metrics names besides tandem's own.
struct MetricsOptions {
  // vLLM's names of the model-server protocol's metrics (the Gateway API
  // Inference Extension's endpoint picker reads them): vllm:num_requests_waiting,
  // vllm:num_requests_running, vllm:kv_cache_usage_perc (and its older name
  // vllm:gpu_cache_usage_perc), vllm:cache_config_info{block_size, num_gpu_blocks}.
  bool vllm = false;
};

// ready: the model has loaded and the server is not draining (tandem_ready).
std::string render_prometheus(const EngineMetrics& m, const ServerCounters& s, bool ready,
                              const MetricsOptions& options = {});

}  // namespace tandem::server
