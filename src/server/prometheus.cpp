#include "server/prometheus.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

namespace tandem::server {
namespace {

class Writer {
 public:
  void header(const std::string& name, const char* type, const char* help) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} {}\n", name, help, name,
                   type);
  }
  void sample(const std::string& name, const std::string& labels, double v) {
    if (labels.empty())
      fmt::format_to(std::back_inserter(out_), "{} {}\n", name, number(v));
    else
      fmt::format_to(std::back_inserter(out_), "{}{{{}}} {}\n", name, labels, number(v));
  }
  void single(const std::string& name, const char* type, const char* help, double v) {
    header(name, type, help);
    sample(name, "", v);
  }
  void histogram(const std::string& name, const char* help, const Histogram& h) {
    header(name, "histogram", help);
    for (size_t i = 0; i < h.bounds.size(); ++i)
      sample(name + "_bucket", fmt::format("le=\"{}\"", number(h.bounds[i])),
             static_cast<double>(i < h.counts.size() ? h.counts[i] : 0));
    sample(name + "_bucket", "le=\"+Inf\"", static_cast<double>(h.count));
    sample(name + "_sum", "", h.sum);
    sample(name + "_count", "", static_cast<double>(h.count));
  }
  std::string take() { return std::move(out_); }

 private:
  static std::string number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (v == std::floor(v) && std::fabs(v) < 1e15)
      return fmt::format("{}", static_cast<int64_t>(v));
    return fmt::format("{}", v);
  }
  std::string out_;
};

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

}  // namespace

std::string render_prometheus(const EngineMetrics& m, const ServerCounters& s) {
  Writer w;
  w.header("tandem_requests_finished_total", "counter",
           "Requests the engine finished, by finish reason");
  std::map<std::string, uint64_t> finished = {
      {"stop", 0}, {"length", 0}, {"cancelled", 0}, {"error", 0}};
  for (const auto& [reason, n] : m.requests) finished[reason] = n;
  for (const auto& [reason, n] : finished)
    w.sample("tandem_requests_finished_total", fmt::format("finish_reason=\"{}\"", reason), n);

  w.header("tandem_requests_rejected_total", "counter",
           "Requests refused before reaching the engine, by reason");
  std::map<std::string, uint64_t> rejected = {{"invalid", 0},
                                              {"model_not_found", 0},
                                              {"queue_full", 0},
                                              {"shutting_down", 0},
                                              {"too_large", 0}};
  for (const auto& [reason, n] : s.rejected) rejected[reason] = n;
  for (const auto& [reason, n] : rejected)
    w.sample("tandem_requests_rejected_total", fmt::format("reason=\"{}\"", reason), n);

  w.single("tandem_client_disconnects_total", "counter",
           "Requests cancelled because the client disconnected", s.client_disconnects);
  w.single("tandem_prompt_tokens_total", "counter", "Prompt tokens of admitted requests",
           m.prompt_tokens);
  w.single("tandem_generation_tokens_total", "counter", "Generated tokens", m.generated_tokens);
  w.single("tandem_spec_drafted_tokens_total", "counter",
           "Draft tokens proposed to the target model", m.drafted_tokens);
  w.single("tandem_spec_accepted_tokens_total", "counter", "Draft tokens the target model accepted",
           m.accepted_tokens);
  w.single("tandem_spec_acceptance_rate", "gauge",
           "Accepted / drafted tokens since start (0 before any draft)",
           ratio(m.accepted_tokens, m.drafted_tokens));
  w.histogram("tandem_tokens_per_round", "Tokens a request gained per decode round",
              m.tokens_per_round);
  w.single("tandem_preemptions_total", "counter",
           "Running requests preempted (KV blocks freed, recomputed later)", m.preemptions);

  w.single("tandem_requests_queued", "gauge", "Requests waiting for admission", m.queued);
  w.single("tandem_requests_running", "gauge", "Requests admitted to the running batch", m.running);
  w.single("tandem_http_requests_in_flight", "gauge", "Generation requests being served over HTTP",
           static_cast<double>(s.http_in_flight));

  struct Cache {
    const char* name;
    const KVCache::Stats& st;
  };
  const Cache caches[] = {{"target", m.kv}, {"draft", m.draft_kv}};
  w.header("tandem_kv_blocks_total", "gauge", "KV cache blocks in the pool");
  for (const auto& c : caches)
    w.sample("tandem_kv_blocks_total", fmt::format("cache=\"{}\"", c.name), c.st.blocks_total);
  w.header("tandem_kv_blocks_used", "gauge", "KV cache blocks referenced by requests");
  for (const auto& c : caches)
    w.sample("tandem_kv_blocks_used", fmt::format("cache=\"{}\"", c.name), c.st.blocks_used);
  w.header("tandem_kv_blocks_free", "gauge",
           "KV cache blocks not referenced by any request (includes cached prefix blocks)");
  for (const auto& c : caches)
    w.sample("tandem_kv_blocks_free", fmt::format("cache=\"{}\"", c.name),
             c.st.blocks_total - c.st.blocks_used);
  w.header("tandem_kv_blocks_cached", "gauge",
           "Free KV cache blocks kept for prefix reuse (reclaimed when needed)");
  for (const auto& c : caches)
    w.sample("tandem_kv_blocks_cached", fmt::format("cache=\"{}\"", c.name), c.st.blocks_cached);
  w.single("tandem_kv_block_size", "gauge", "Positions per KV cache block", m.kv.block_size);

  w.header("tandem_prefix_cache_queried_tokens_total", "counter",
           "Prompt tokens looked up in the prefix cache");
  for (const auto& c : caches)
    w.sample("tandem_prefix_cache_queried_tokens_total", fmt::format("cache=\"{}\"", c.name),
             c.st.prefix_lookup_tokens);
  w.header("tandem_prefix_cache_hit_tokens_total", "counter",
           "Prompt tokens found in the prefix cache (their prefill was skipped)");
  for (const auto& c : caches)
    w.sample("tandem_prefix_cache_hit_tokens_total", fmt::format("cache=\"{}\"", c.name),
             c.st.prefix_hit_tokens);
  w.header("tandem_prefix_cache_hit_rate", "gauge", "Hit tokens / queried tokens since start");
  for (const auto& c : caches)
    w.sample("tandem_prefix_cache_hit_rate", fmt::format("cache=\"{}\"", c.name),
             ratio(c.st.prefix_hit_tokens, c.st.prefix_lookup_tokens));

  w.histogram("tandem_time_to_first_token_seconds", "From submission to the first generated token",
              m.time_to_first_token);
  w.histogram("tandem_inter_token_latency_seconds",
              "Between generated tokens (a round's tokens share its time)", m.inter_token_latency);
  return w.take();
}

}  // namespace tandem::server
