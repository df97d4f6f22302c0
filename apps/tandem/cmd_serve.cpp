// `tandem serve`: the OpenAI-compatible HTTP server (src/server) over one
// engine: continuous batching, a paged KV cache (blocks of 16 positions) with
// prefix caching, and optional speculative decoding. SIGINT/SIGTERM stop it
// gracefully (a second signal cancels what is still running); it exits 0.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/async_engine.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/http_server.h"
#include "server/signal_watcher.h"

namespace tandem::cli {
namespace {

constexpr int kBlockSize = 16;

struct ServeOpts {
  std::string model;
  SpecCliOptions spec;
  DeviceCliOptions device;
  std::string host = "127.0.0.1";
  int port = 8080;
  int max_batch = 8;
  int64_t kv_tokens = 0;
  int max_queue = 64;
  int threads = 0;
  std::string model_name;
  int ctx = 0;
  int prefill_chunk = 512;
  bool no_prefix_cache = false;
  std::string kv_type = "f16";
  size_t max_body = 8u << 20;
  double drain_timeout = 30;
  int http_threads = 0;
  bool quiet = false;
  std::string api_key;
  bool insecure = false;
  bool public_metrics = false;
  int max_prompt_tokens = 0;
  SamplingMode sampling_mode = SamplingMode::Reproducible;
  std::string metrics_compat;  // "": tandem's names only; "vllm": vLLM's beside them
  server::ConnectionTimeouts timeouts;
};

// The id clients use for the model: the file name without ".gguf", or the directory name.
std::string default_model_name(const std::string& path) {
  std::filesystem::path p(path);
  if (p.filename().empty()) p = p.parent_path();
  return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

// KV bytes one position takes in a model's cache (all layers, K and V).
int64_t kv_bytes_per_position(const Model& m, DType type) {
  const auto& c = m.config();
  return int64_t{c.n_layers} * 2 * c.n_kv_heads * c.head_dim * (type == DType::F32 ? 4 : 2);
}

// Default KV budget: room for every batch slot to hold a long request
// (min(ctx, 2048) positions) and always one full context, but no more than a
// quarter of the machine's memory for the target and draft caches together.
int64_t default_kv_tokens(const ServeOpts& o, int n_ctx, int64_t bytes_per_position) {
  int64_t want = std::max<int64_t>(n_ctx, int64_t{o.max_batch} * std::min(n_ctx, 2048));
  const int64_t mem = int64_t{sysconf(_SC_PHYS_PAGES)} * sysconf(_SC_PAGE_SIZE);
  if (mem > 0 && bytes_per_position > 0) want = std::min(want, mem / 4 / bytes_per_position);
  return std::max<int64_t>(kBlockSize, want);
}

void run_serve(const ServeOpts& o) {
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client must fail a write, not kill the server
  check(o.max_batch >= 1, "--max-batch must be >= 1, got {}", o.max_batch);
  check(o.max_queue >= 1, "--max-queue must be >= 1, got {}", o.max_queue);
  check(o.port >= 0 && o.port <= 65535, "--port must be in [0, 65535], got {}", o.port);
  const SpecOptions spec_opt = spec_options(o.spec);  // validate -k before loading anything
  // --device cuda where it cannot run fails here, before the server listens.
  const ForwardPassFactory forward_pass = forward_pass_factory(o.device);
  check(o.max_prompt_tokens >= 0, "--max-prompt-tokens must be >= 0, got {}", o.max_prompt_tokens);
  for (auto [value, name] : {std::pair{o.timeouts.idle_s, "--idle-timeout"},
                             std::pair{o.timeouts.header_s, "--header-timeout"},
                             std::pair{o.timeouts.body_s, "--body-timeout"}})
    check(value > 0, "{} must be > 0 seconds, got {}", name, value);
  const server::AccessOptions access{o.api_key, o.public_metrics};
  (void)server::AccessControl(access);  // checks the key before the model loads
  server::check_listen_policy(o.host, !o.api_key.empty(), o.insecure);
  check(o.metrics_compat.empty() || o.metrics_compat == "vllm",
        "--metrics-compat: unknown naming '{}' (expected vllm)", o.metrics_compat);

  // Listen first: while the model loads, /health answers 503 "starting" (a load
  // balancer or Kubernetes then waits) and the API 503 "model_loading".
  server::ServerOptions so;
  so.host = o.host;
  so.port = o.port;
  so.model_name = o.model_name.empty() ? default_model_name(o.model) : o.model_name;
  so.max_body_bytes = o.max_body;
  so.drain_timeout_s = o.drain_timeout;
  so.log_requests = !o.quiet;
  // One HTTP thread per waiting or running request, plus some for /metrics and
  // /health, so that a full queue is answered with 429 at once.
  so.http_threads = o.http_threads > 0 ? o.http_threads : o.max_queue + o.max_batch + 16;
  so.access = access;
  so.timeouts = o.timeouts;
  so.metrics.vllm = o.metrics_compat == "vllm";
  server::HttpServer http(so);
  const int port = http.bind();
  server::SignalWatcher signals([&http](int signo, int count) {
    const bool force = count >= 2;
    fmt::print(stderr, "server: {} received: {}\n", signo == SIGINT ? "SIGINT" : "SIGTERM",
               force ? "cancelling in-flight requests"
                     : "finishing in-flight requests (signal again to cancel them)");
    http.request_stop(force);
  });
  http.start();
  fmt::print("tandem serve: starting on http://{}:{} (loading {})\n", o.host, port, o.model);
  std::fflush(stdout);

  auto model = load_model(o.model);
  ThreadPool pool(o.threads);
  const DType kv_type = o.kv_type == "f32" ? DType::F32 : DType::F16;
  const int model_ctx = model->config().context_length;
  const int n_ctx = o.ctx > 0 ? std::min(o.ctx, model_ctx) : std::min(model_ctx, 8192);

  EngineOptions eo;
  eo.max_batch = o.max_batch;
  eo.n_ctx = n_ctx;
  eo.prefill_chunk = o.prefill_chunk;
  eo.prefix_cache = !o.no_prefix_cache;
  eo.spec = spec_opt;
  eo.kv.kind = KVCacheConfig::Kind::Paged;
  eo.kv.block_size = kBlockSize;
  eo.kv.type = kv_type;
  // The draft model's cache (same configuration) is not loaded yet: estimate it as the target's.
  const int64_t per_pos = kv_bytes_per_position(*model, kv_type) *
                          (o.spec.draft.empty() || o.spec.draft == "ngram" ? 1 : 2);
  eo.kv.n_positions = o.kv_tokens > 0 ? o.kv_tokens : default_kv_tokens(o, n_ctx, per_pos);
  check(eo.kv.n_positions >= kBlockSize, "--kv-cache-tokens must be >= {}, got {}", kBlockSize,
        eo.kv.n_positions);

  eo.forward_pass = forward_pass;
  SpecSetup spec = make_drafter(o.spec, *model, pool, engine_cache_config(eo), forward_pass);
  auto engine = std::make_unique<Engine>(*model, pool, eo, std::move(spec.drafter));
  const EngineMetrics m0 = engine->metrics();

  server::Serving serving;
  serving.limits.n_ctx = engine->n_ctx();
  serving.limits.kv_positions = m0.kv.blocks_total * m0.kv.block_size;
  serving.limits.max_prompt_tokens = o.max_prompt_tokens;
  serving.defaults.sampling_mode = o.sampling_mode;

  AsyncEngine async(std::move(engine), o.max_queue);
  http.attach(async, *model, serving);
  const auto& b = http.builder();

  fmt::print(
      stderr,
      "model {} as '{}' ({} threads), context {}, max batch {}, queue {}, KV cache {} "
      "positions in blocks of {} ({} MB target{}), prefix cache {}, chat template {}, "
      "draft {}, sampling mode {}\n",
      model->path(), so.model_name, pool.size(), serving.limits.n_ctx, o.max_batch, o.max_queue,
      serving.limits.kv_positions, m0.kv.block_size,
      serving.limits.kv_positions * kv_bytes_per_position(*model, kv_type) / 1000000,
      m0.draft_kv.blocks_total ? fmt::format(", draft {} blocks", m0.draft_kv.blocks_total)
                               : std::string(),
      eo.prefix_cache ? "on" : "off", b.chat_family(),
      o.spec.draft.empty() ? std::string("none") : fmt::format("{} (k={})", o.spec.draft, o.spec.k),
      sampling_mode_name(o.sampling_mode));
  fmt::print(stderr, "{}\n",
             access.api_key.empty()
                 ? std::string("no API key: every client that can connect may use the server")
                 : fmt::format("API key required on /v1/*{}",
                               access.public_metrics ? " (/metrics is public)" : " and /metrics"));
  if (!b.chat_unavailable_reason().empty())
    fmt::print(stderr, "warning: /v1/chat/completions will answer 400: {}\n",
               b.chat_unavailable_reason());

  fmt::print("tandem serve: listening on http://{}:{}\n", o.host, port);
  std::fflush(stdout);
  http.serve();
  async.shutdown(false);
  fmt::print(stderr, "server: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server");
  auto opts = std::make_shared<ServeOpts>();
  ServeOpts& o = *opts;
  cmd->add_option("-m,--model", o.model, "Target model (GGUF or HF directory)")->required();
  add_spec_options(cmd, o.spec);
  add_device_options(cmd, o.device);
  cmd->add_option("--host", o.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o.port, "Port to listen on; 0 picks a free one")->capture_default_str();
  cmd->add_option("--max-batch", o.max_batch, "Requests decoded together")->capture_default_str();
  cmd->add_option("--kv-cache-tokens", o.kv_tokens,
                  "Positions in the KV cache, shared by all requests (and as many in the draft "
                  "model's cache); default: max-batch x min(ctx, 2048), at least ctx, at most "
                  "a quarter of memory");
  cmd->add_option("--max-queue", o.max_queue,
                  "Requests waiting for admission at most; more get 429")
      ->capture_default_str();
  cmd->add_option("-t,--threads", o.threads, "Compute threads (default: physical cores)");
  cmd->add_option("--model-name", o.model_name,
                  "Model id for the API (default: the model file's name without .gguf)");
  cmd->add_option("-c,--ctx", o.ctx,
                  "Positions one request may use, prompt + completion (default: the model's "
                  "context length, at most 8192)");
  cmd->add_option("--prefill-chunk", o.prefill_chunk, "Prompt tokens per prefill step")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-cache", o.no_prefix_cache, "Do not share prompt KV blocks");
  cmd->add_option("--kv-type", o.kv_type, "KV cache type: f16 or f32")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str();
  cmd->add_option("--max-body", o.max_body, "Largest request body in bytes; larger get 413")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", o.drain_timeout,
                  "Seconds in-flight requests get to finish on SIGINT/SIGTERM")
      ->capture_default_str();
  cmd->add_option("--http-threads", o.http_threads,
                  "HTTP connections served at once (default: max-queue + max-batch + 16)");
  cmd->add_flag("-q,--quiet", o.quiet, "No log line per request");
  cmd->add_option("--api-key", o.api_key,
                  "Require 'Authorization: Bearer KEY' on /v1/* (and /metrics); several keys "
                  "separated by commas are separate tenants (none is drafted from another's "
                  "text); also read from TANDEM_API_KEY")
      ->envname("TANDEM_API_KEY");
  cmd->add_flag("--insecure", o.insecure,
                "Allow listening on a non-loopback address without an API key");
  cmd->add_flag("--public-metrics", o.public_metrics, "Serve /metrics without the API key");
  add_sampling_mode_option(cmd, o.sampling_mode);
  cmd->add_option("--metrics-compat", o.metrics_compat,
                  "Also name the load-balancing metrics as this server does on /metrics: vllm "
                  "(vllm:num_requests_waiting, vllm:kv_cache_usage_perc, ...), which the Gateway "
                  "API Inference Extension's endpoint picker reads")
      ->check(CLI::IsMember({"vllm"}));
  cmd->add_option("--max-prompt-tokens", o.max_prompt_tokens,
                  "Longest prompt accepted, in tokens (default: what fits the context)");
  cmd->add_option("--idle-timeout", o.timeouts.idle_s,
                  "Seconds a connection may wait before sending a request")
      ->capture_default_str();
  cmd->add_option("--header-timeout", o.timeouts.header_s,
                  "Seconds from a request's first byte to the end of its headers (408 after)")
      ->capture_default_str();
  cmd->add_option("--body-timeout", o.timeouts.body_s,
                  "Seconds for a request body to arrive once its headers are in (408 after)")
      ->capture_default_str();
  cmd->callback([opts] { run_serve(*opts); });
}

}  // namespace tandem::cli
