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

std::string render_prometheus(const EngineMetrics& m, const ServerCounters& s, bool ready,
                              const MetricsOptions& options) {
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

  w.single("tandem_ready", "gauge",
           "1 when the model has loaded and the server takes requests (0: starting or draining)",
           ready ? 1 : 0);
  w.single("tandem_requests_queued", "gauge", "Requests waiting for admission", m.queued);
  w.single("tandem_requests_running", "gauge", "Requests admitted to the running batch", m.running);
  // The model-server protocol's KV cache utilisation: blocks referenced by
  // requests over all blocks (blocks kept only for prefix reuse count as free:
  // they are reclaimed when needed).
  const double kv_usage = ratio(m.kv.blocks_used, m.kv.blocks_total);
  w.single("tandem_kv_cache_usage_ratio", "gauge",
           "Target KV cache blocks referenced by requests / all blocks (0-1)", kv_usage);
  w.header("tandem_cache_config_info", "gauge",
           "The target KV cache's block size and block count (labels; value 1)");
  w.sample("tandem_cache_config_info",
           fmt::format("block_size=\"{}\",num_blocks=\"{}\"", m.kv.block_size, m.kv.blocks_total),
           1);
  w.single("tandem_http_requests_in_flight", "gauge", "Generation requests being served over HTTP",
           static_cast<double>(s.http_in_flight));
  if (s.heap_bytes_in_use >= 0)
    w.single("tandem_heap_bytes_in_use", "gauge",
             "Bytes malloc has handed out and not had back (glibc mallinfo2)",
             static_cast<double>(s.heap_bytes_in_use));

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

  // The target's lookups are counted by the engine (a request's prompt, once
  // per admission); a draft model's by its cache (a request's text so far,
  // when the draft model first catches up on it).
  const char* target = "cache=\"target\"";
  const char* draft = "cache=\"draft\"";
  w.header("tandem_prefix_cache_queried_tokens_total", "counter",
           "Tokens looked up in the prefix cache: the target's prompts, once per admission; "
           "the draft model's text, once per request it drafts for");
  w.sample("tandem_prefix_cache_queried_tokens_total", target, m.prefix_queried_tokens);
  w.sample("tandem_prefix_cache_queried_tokens_total", draft, m.draft_kv.prefix_queried_tokens);
  w.header("tandem_prefix_cache_hit_tokens_total", "counter",
           "Tokens found in the prefix cache (their prefill or catch-up was skipped)");
  w.sample("tandem_prefix_cache_hit_tokens_total", target, m.prefix_hit_tokens);
  w.sample("tandem_prefix_cache_hit_tokens_total", draft, m.draft_kv.prefix_hit_tokens);
  w.header("tandem_prefix_cache_hit_rate", "gauge", "Hit tokens / queried tokens since start");
  w.sample("tandem_prefix_cache_hit_rate", target,
           ratio(m.prefix_hit_tokens, m.prefix_queried_tokens));
  w.sample("tandem_prefix_cache_hit_rate", draft,
           ratio(m.draft_kv.prefix_hit_tokens, m.draft_kv.prefix_queried_tokens));

  w.histogram("tandem_time_to_first_token_seconds", "From submission to the first generated token",
              m.time_to_first_token);
  w.histogram("tandem_inter_token_latency_seconds",
              "Between generated tokens (a round's tokens share its time)", m.inter_token_latency);
  if (options.vllm) {
    // The same figures under the names the inference gateway's endpoint picker
    // reads from vLLM (its model-server protocol); the usage is a fraction (0-1),
    // as vLLM reports it despite the name.
    w.single("vllm:num_requests_waiting", "gauge", "Requests waiting for admission", m.queued);
    w.single("vllm:num_requests_running", "gauge", "Requests in the running batch", m.running);
    w.single("vllm:kv_cache_usage_perc", "gauge", "KV cache usage (0-1)", kv_usage);
    w.single("vllm:gpu_cache_usage_perc", "gauge", "KV cache usage (0-1), the older name",
             kv_usage);
    w.single("vllm:prefix_cache_queries_total", "counter",
             "Prompt tokens looked up in the prefix cache", m.prefix_queried_tokens);
    w.single("vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache",
             m.prefix_hit_tokens);
    w.header("vllm:cache_config_info", "gauge", "KV cache configuration (labels; value 1)");
    w.sample(
        "vllm:cache_config_info",
        fmt::format("block_size=\"{}\",num_gpu_blocks=\"{}\"", m.kv.block_size, m.kv.blocks_total),
        1);
  }
  return w.take();
}

}  // namespace tandem::server
