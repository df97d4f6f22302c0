// The /metrics text: Prometheus exposition format (every sample preceded by its
// TYPE, names and labels well formed, histograms cumulative with +Inf = count)
// and the values taken from the engine's and the server's counters.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "server/heap_usage.h"
#include "server/prometheus.h"

using namespace tandem;
using namespace tandem::server;

namespace {

EngineMetrics sample_metrics() {
  EngineMetrics m;
  m.requests = {{"stop", 3}, {"length", 2}};
  m.prompt_tokens = 100;
  m.generated_tokens = 50;
  m.drafted_tokens = 40;
  m.accepted_tokens = 30;
  m.preemptions = 4;
  for (double v : {1.0, 1.0, 3.0, 20.0}) m.tokens_per_round.observe(v);
  m.time_to_first_token.observe(0.03);
  m.time_to_first_token.observe(0.2);
  m.inter_token_latency.observe(0.02);
  m.queued = 2;
  m.running = 5;
  m.kv = {100, 30, 10, 16};
  m.prefix_queried_tokens = 200;
  m.prefix_hit_tokens = 50;
  m.draft_kv.prefix_queried_tokens = 80;
  m.draft_kv.prefix_hit_tokens = 60;
  return m;
}

// name{labels} -> value, checking each line's syntax and that a TYPE came first.
std::map<std::string, double> parse(const std::string& text) {
  // name, optional {label="value",...}, one space, the value.
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*))"
      R"((\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? (\S+)$)");
  std::map<std::string, double> out;
  std::set<std::string> typed;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream l(line.substr(7));
      std::string name, type;
      l >> name >> type;
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
      typed.insert(name);
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0) continue;
    std::smatch m;
    EXPECT_TRUE(std::regex_match(line, m, sample)) << line;
    if (m.empty()) continue;
    std::string base = m[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (!typed.count(base) && base.size() > strlen(suffix) &&
          base.compare(base.size() - strlen(suffix), strlen(suffix), suffix) == 0)
        base = base.substr(0, base.size() - strlen(suffix));
    EXPECT_TRUE(typed.count(base)) << "no TYPE before " << line;
    out[std::string(m[1]) + std::string(m[2])] = std::stod(m[4]);
  }
  return out;
}

}  // namespace

TEST(ServerPrometheus, ValuesAndFormat) {
  ServerCounters s;
  s.rejected = {{"invalid", 7}, {"queue_full", 1}};
  s.client_disconnects = 2;
  s.http_in_flight = 6;
  auto m = parse(render_prometheus(sample_metrics(), s, true));
  EXPECT_EQ(m.at("tandem_requests_finished_total{finish_reason=\"stop\"}"), 3);
  EXPECT_EQ(m.at("tandem_requests_finished_total{finish_reason=\"cancelled\"}"), 0);
  EXPECT_EQ(m.at("tandem_requests_rejected_total{reason=\"invalid\"}"), 7);
  EXPECT_EQ(m.at("tandem_requests_rejected_total{reason=\"too_large\"}"), 0);
  EXPECT_EQ(m.at("tandem_client_disconnects_total"), 2);
  EXPECT_EQ(m.at("tandem_prompt_tokens_total"), 100);
  EXPECT_EQ(m.at("tandem_generation_tokens_total"), 50);
  EXPECT_EQ(m.at("tandem_spec_drafted_tokens_total"), 40);
  EXPECT_EQ(m.at("tandem_spec_accepted_tokens_total"), 30);
  EXPECT_DOUBLE_EQ(m.at("tandem_spec_acceptance_rate"), 0.75);
  EXPECT_EQ(m.at("tandem_preemptions_total"), 4);
  EXPECT_EQ(m.at("tandem_requests_queued"), 2);
  EXPECT_EQ(m.at("tandem_requests_running"), 5);
  EXPECT_EQ(m.at("tandem_http_requests_in_flight"), 6);
  EXPECT_EQ(m.at("tandem_kv_blocks_total{cache=\"target\"}"), 100);
  EXPECT_EQ(m.at("tandem_kv_blocks_used{cache=\"target\"}"), 30);
  EXPECT_EQ(m.at("tandem_kv_blocks_free{cache=\"target\"}"), 70);
  EXPECT_EQ(m.at("tandem_kv_blocks_cached{cache=\"target\"}"), 10);
  EXPECT_EQ(m.at("tandem_kv_blocks_used{cache=\"draft\"}"), 0);
  EXPECT_EQ(m.at("tandem_kv_block_size"), 16);
  EXPECT_DOUBLE_EQ(m.at("tandem_prefix_cache_hit_rate{cache=\"target\"}"), 0.25);
  EXPECT_EQ(m.at("tandem_prefix_cache_queried_tokens_total{cache=\"target\"}"), 200);
  EXPECT_EQ(m.at("tandem_prefix_cache_hit_tokens_total{cache=\"target\"}"), 50);
  EXPECT_EQ(m.at("tandem_prefix_cache_queried_tokens_total{cache=\"draft\"}"), 80);
  EXPECT_EQ(m.at("tandem_prefix_cache_hit_tokens_total{cache=\"draft\"}"), 60);
  EXPECT_DOUBLE_EQ(m.at("tandem_prefix_cache_hit_rate{cache=\"draft\"}"), 0.75);
  // Histograms: cumulative buckets, +Inf equal to the count, the sum of the observations.
  EXPECT_EQ(m.at("tandem_tokens_per_round_bucket{le=\"1\"}"), 2);
  EXPECT_EQ(m.at("tandem_tokens_per_round_bucket{le=\"3\"}"), 3);
  EXPECT_EQ(m.at("tandem_tokens_per_round_bucket{le=\"17\"}"), 3);
  EXPECT_EQ(m.at("tandem_tokens_per_round_bucket{le=\"+Inf\"}"), 4);
  EXPECT_EQ(m.at("tandem_tokens_per_round_count"), 4);
  EXPECT_EQ(m.at("tandem_tokens_per_round_sum"), 25);
  EXPECT_EQ(m.at("tandem_time_to_first_token_seconds_bucket{le=\"0.025\"}"), 0);
  EXPECT_EQ(m.at("tandem_time_to_first_token_seconds_bucket{le=\"0.05\"}"), 1);
  EXPECT_EQ(m.at("tandem_time_to_first_token_seconds_bucket{le=\"0.25\"}"), 2);
  EXPECT_DOUBLE_EQ(m.at("tandem_time_to_first_token_seconds_sum"), 0.23);
  EXPECT_EQ(m.at("tandem_inter_token_latency_seconds_count"), 1);
  // The model-server protocol's figures under tandem's names.
  EXPECT_EQ(m.at("tandem_ready"), 1);
  EXPECT_DOUBLE_EQ(m.at("tandem_kv_cache_usage_ratio"), 0.3);
  EXPECT_EQ(m.at("tandem_cache_config_info{block_size=\"16\",num_blocks=\"100\"}"), 1);
  EXPECT_FALSE(m.count("vllm:num_requests_waiting")) << "vLLM's names only when asked for";
}

// The heap gauge appears where the C library reports it (glibc: a live process
// always has some heap in use), and not at all where it does not.
TEST(ServerPrometheus, HeapBytesInUseOnlyWhereKnown) {
  ServerCounters s;
  EXPECT_EQ(parse(render_prometheus(sample_metrics(), s, true)).count("tandem_heap_bytes_in_use"),
            0u);
  s.heap_bytes_in_use = heap_bytes_in_use();
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  ASSERT_GT(s.heap_bytes_in_use, 0);
#endif
  if (s.heap_bytes_in_use < 0) GTEST_SKIP() << "the heap in use is not known in this build";
  const std::vector<char> more(1 << 20, 1);  // a megabyte more in use
  const int64_t with_more = heap_bytes_in_use();
  EXPECT_GE(with_more - s.heap_bytes_in_use, int64_t{1} << 20);
  EXPECT_EQ(more[12345], 1);  // (keeps the allocation)
  s.heap_bytes_in_use = with_more;
  EXPECT_EQ(parse(render_prometheus(sample_metrics(), s, true)).at("tandem_heap_bytes_in_use"),
            static_cast<double>(with_more));
}

// --metrics-compat vllm: the names the inference gateway's endpoint picker reads
// (its model-server protocol), with the same values and types as tandem's own.
TEST(ServerPrometheus, VllmNamesOfTheModelServerProtocol) {
  MetricsOptions vllm;
  vllm.vllm = true;
  const std::string text = render_prometheus(sample_metrics(), ServerCounters{}, true, vllm);
  auto m = parse(text);
  EXPECT_EQ(m.at("vllm:num_requests_waiting"), 2);
  EXPECT_EQ(m.at("vllm:num_requests_running"), 5);
  EXPECT_DOUBLE_EQ(m.at("vllm:kv_cache_usage_perc"), 0.3);
  EXPECT_DOUBLE_EQ(m.at("vllm:gpu_cache_usage_perc"), 0.3);
  EXPECT_EQ(m.at("vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"100\"}"), 1);
  EXPECT_EQ(m.at("vllm:prefix_cache_queries_total"), 200);
  EXPECT_EQ(m.at("vllm:prefix_cache_hits_total"), 50);
  EXPECT_NE(text.find("# TYPE vllm:prefix_cache_hits_total counter"), std::string::npos);
  for (const char* gauge : {"vllm:num_requests_waiting", "vllm:num_requests_running",
                            "vllm:kv_cache_usage_perc", "vllm:cache_config_info"})
    EXPECT_NE(text.find(std::string("# TYPE ") + gauge + " gauge"), std::string::npos) << gauge;
  EXPECT_EQ(m.at("tandem_requests_queued"), 2) << "tandem's own names stay";
}

TEST(ServerPrometheus, EmptyMetricsAreWellFormed) {
  auto m = parse(render_prometheus(EngineMetrics{}, ServerCounters{}, false));
  EXPECT_EQ(m.at("tandem_ready"), 0);
  EXPECT_EQ(m.at("tandem_kv_cache_usage_ratio"), 0);
  EXPECT_EQ(m.at("tandem_prefix_cache_hit_rate{cache=\"target\"}"), 0);  // no lookups: 0, not NaN
  EXPECT_EQ(m.at("tandem_spec_acceptance_rate"), 0);
  EXPECT_EQ(m.at("tandem_tokens_per_round_bucket{le=\"+Inf\"}"), 0);
  EXPECT_EQ(m.at("tandem_kv_blocks_free{cache=\"target\"}"), 0);
}
