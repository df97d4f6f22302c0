// `tandem bench`: performance figures of this machine and build.
//   bench membw            multi-threaded streaming read bandwidth
//   bench decode -m MODEL  prefill and decode tokens/s, the cost of verifying K+1
//                          positions relative to one, and decode's fraction of the
//                          memory-bandwidth bound; the last line is one JSON object.
//   bench spec             plain vs speculative decoding (cmd_bench_spec.cpp)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "cache/contiguous_kv_cache.h"
#include "cli_common.h"
#include "commands.h"
#include "core/aligned.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "decode_profile.h"
#include "handoff_latency.h"
#include "kernels/kernel_config.h"
#include "model/model.h"
#include "model/transformer.h"
#include "sampling/gumbel_sampler.h"
#include "sampling/sampler.h"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// `bench membw`'s measurement, which `bench decode` repeats in the same run to
// state its decode rate against: one figure for the machine's limit, not two.
constexpr size_t kMembwMiB = 1024;
constexpr int kMembwReps = 7;

// Every thread summing its share of a buffer far larger than the caches, one
// pass at a time, in GB/s (1e9 bytes).
class ReadBandwidth {
 public:
  ReadBandwidth(ThreadPool& pool, size_t bytes)
      : pool_(pool), buf_(bytes / sizeof(uint64_t)), sums_(pool.size()) {
    // Huge pages where the kernel gives them (core/aligned.h), as the packed
    // weights have: the limit the decode step is held to.
    pool_.parallel_for(
        static_cast<int64_t>(buf_.size()),
        [this](int64_t b, int64_t e, int) {
          for (int64_t i = b; i < e; ++i) buf_[i] = static_cast<uint64_t>(i);  // fault pages in
        },
        4096);
  }
  ~ReadBandwidth() {
    uint64_t total = 0;
    for (auto s : sums_) total += s;
    if (total == 42) fmt::print("");  // keep `sums_` observable
  }

  double pass() {
    const auto t0 = Clock::now();
    pool_.parallel_for(
        static_cast<int64_t>(buf_.size()),
        [this](int64_t b, int64_t e, int t) {
          // Four independent sums let the loads stream; the result is kept so the
          // compiler cannot drop the reads. Each cache line is also prefetched 16 KiB
          // ahead, as the matmul kernels do: without it the out-of-order window keeps
          // too few misses in flight and this would understate the bandwidth.
          uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          constexpr int64_t kAhead = (16 << 10) / sizeof(uint64_t);
          const uint64_t* buf = buf_.data();
          int64_t i = b;
          for (; i + 8 <= e; i += 8) {
            if (i + kAhead < e) __builtin_prefetch(&buf[i + kAhead], 0, 2);
            s0 += buf[i] + buf[i + 4];
            s1 += buf[i + 1] + buf[i + 5];
            s2 += buf[i + 2] + buf[i + 6];
            s3 += buf[i + 3] + buf[i + 7];
          }
          for (; i < e; ++i) s0 += buf[i];
          sums_[t] += s0 + s1 + s2 + s3;
        },
        4096);
    return static_cast<double>(buf_.size() * sizeof(uint64_t)) / seconds_since(t0) / 1e9;
  }

 private:
  ThreadPool& pool_;
  AlignedVector<uint64_t> buf_;
  std::vector<uint64_t> sums_;
};

// Best of `reps` passes (`bench membw`).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes = kMembwMiB << 20,
                              int reps = kMembwReps) {
  ReadBandwidth bw(pool, bytes);
  double best = 0.0;
  for (int r = 0; r < reps; ++r) best = std::max(best, bw.pass());
  return best;
}

std::vector<int> pseudo_random_tokens(int n, int vocab, uint32_t seed) {
  std::vector<int> ids(n);
  for (auto& id : ids) {
    seed = seed * 1664525u + 1013904223u;
    id = static_cast<int>((seed >> 8) % static_cast<uint32_t>(vocab));
  }
  return ids;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct DecodeOptions {
  std::string model;
  int threads = 0;
  int prompt_tokens = 128;
  int gen_tokens = 64;
  int k = 5;
  int verify_reps = 10;
  bool profile = false;
  std::string kv = "f16";
  std::string quant = "none";         // requantize at load, as --draft-quant does a draft
  std::vector<int> verify_positions;  // more verify widths to time, beside K+1
  std::vector<int> batches;           // decode steps of this many sequences at once
  DeviceCliOptions device;
};

// Median time of one forward over `m` new positions of `slot` (all logits, as a
// verification needs), from `at`, the cache rolled back after each.
double time_verify(ForwardPass& tf, KVCache& cache, int slot, const std::vector<int>& ids, int at,
                   int m, int reps, float* logits) {
  ForwardBatch b;
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    b.clear();
    b.add_sequence(slot, &ids[at], m, at, m > 1, m == 1);
    const auto t0 = Clock::now();
    tf.forward(b, cache, logits);
    t.push_back(seconds_since(t0));
    cache.truncate_to(slot, at);
  }
  return median(t);
}

struct BatchRate {
  int batch;
  double step_ms, tok_per_s;
};

// Decode throughput with `batch` sequences in flight: each prefilled with
// `prompt` tokens, then `steps` decode steps of one position per sequence (the
// steady state of continuous batching at that concurrency, without a scheduler).
BatchRate time_batched_decode(ForwardPass& tf, KVCache& cache, const std::vector<int>& ids,
                              int batch, int prompt, int steps, float* logits) {
  std::vector<int> slots(batch);
  ForwardBatch b;
  for (int& s : slots) {
    s = cache.allocate();
    b.clear();
    b.add_sequence(s, ids.data(), prompt, 0, false, true);
    tf.forward(b, cache, logits);
  }
  auto step = [&](int i) {
    b.clear();
    for (int s = 0; s < batch; ++s)
      b.add_sequence(slots[s], &ids[prompt + i], 1, prompt + i, false, true);
    tf.forward(b, cache, logits);
  };
  step(0);  // warm-up (on a device: the bucket's graph is captured here)
  const auto t0 = Clock::now();
  for (int i = 1; i <= steps; ++i) step(i);
  const double sec = seconds_since(t0);
  for (int s : slots) cache.free(s);
  return {batch, 1000.0 * sec / steps, batch * steps / sec};
}

void run_decode_bench(const DecodeOptions& o) {
  check(o.prompt_tokens >= 1 && o.gen_tokens >= 1 && o.k >= 1 && o.verify_reps >= 1,
        "bench decode: --prompt, --gen, -k and --reps must be at least 1");
  // On a device, --profile has the pass time its kernels (eagerly).
  const ForwardPassFactory forward_pass = forward_pass_factory(o.device, o.profile);
  ThreadPool pool(o.threads);
  kernels::KernelConfig kernel_config = kernels::kernel_config_from_env();
  kernel_config.profile = o.profile;
  const auto load_t0 = Clock::now();
  auto model = Model::load(o.model, kernel_config, parse_requantization(o.quant));
  const double load_s = seconds_since(load_t0);
  int widest = o.k + 1, max_batch = 1;
  for (int m : o.verify_positions) {
    check(m >= 1, "bench decode: --verify-positions must be at least 1, got {}", m);
    widest = std::max(widest, m);
  }
  for (int n : o.batches) {
    check(n >= 1, "bench decode: --batch must be at least 1, got {}", n);
    max_batch = std::max(max_batch, n);
  }
  const int ctx = o.prompt_tokens + std::max(o.gen_tokens, widest) + 2;
  check(ctx <= model->config().context_length,
        "bench decode: {} positions exceed the model's context length {}", ctx,
        model->config().context_length);
  // One contiguous slot of ctx positions (on a device: as many, in blocks).
  ForwardPassSpec spec;
  spec.max_tokens = std::max(Transformer::kDefaultMaxTokens, max_batch);
  spec.kv.n_slots = 1 + (o.batches.empty() ? 0 : max_batch);
  spec.kv.n_ctx = ctx;
  spec.kv.type = o.kv == "f32" ? DType::F32 : DType::F16;
  const auto pass_t0 = Clock::now();
  std::unique_ptr<ForwardPass> pass = make_forward_pass(forward_pass, *model, pool, spec);
  const double pass_s = seconds_since(pass_t0);
  ForwardPass& tf = *pass;
  auto* cpu = dynamic_cast<Transformer*>(pass.get());  // null on a device
  const int V = tf.vocab_size();
  std::unique_ptr<KVCache> cache_owner = tf.make_cache(spec.kv);
  KVCache& cache = *cache_owner;
  const int slot = cache.allocate();
  const auto ids = pseudo_random_tokens(ctx, V, 1234);
  AlignedVector<float> logits(static_cast<size_t>(std::max(widest, max_batch)) * V);
  ForwardBatch b;

  const bool non_temporal =
      kernels::non_temporal_streams(kernel_config.stream_prefetch, kernels::this_cpu());
  fmt::print(
      "model {} ({}), {} threads, {} {}{}, KV cache {}\n", o.model, model->format(), pool.size(),
      cpu ? "SIMD" : "device", cpu ? cpu->kernels().name() : o.device.device,
      cpu ? (non_temporal ? " (weights read once: prefetchnta)" : " (weights: prefetcht1)") : "",
      o.kv);
  const auto& packing = model->packing();
  fmt::print(
      "loaded in {:.2f} s (packed {} matrices, {:.1f} MB, in {:.2f} s); forward pass set up in "
      "{:.2f} s\n",
      load_s, packing.matrices, packing.bytes / 1e6, packing.seconds, pass_s);
  if (const std::string rq = requantized_line(*model, o.quant); !rq.empty())
    fmt::print("requantized {}\n", rq);
  // Warm-up: page the weights in (they are used in place from the file's map).
  b.add_sequence(slot, ids.data(), 1, 0, false, true);
  tf.forward(b, cache, logits.data());
  cache.truncate_to(slot, 0);

  b.clear();
  b.add_sequence(slot, ids.data(), o.prompt_tokens, 0, false, true);
  auto t0 = Clock::now();
  tf.forward(b, cache, logits.data());
  const double prefill_s = seconds_since(t0);

  // Verification cost at the current context length: one forward over K+1 new
  // positions (all logits, as verification needs) against one over 1 position.
  const int at = cache.length(slot);
  const double m1_s = time_verify(tf, cache, slot, ids, at, 1, o.verify_reps, logits.data());
  const double mk_s = time_verify(tf, cache, slot, ids, at, o.k + 1, o.verify_reps, logits.data());
  std::vector<std::pair<int, double>> verify_widths;  // (positions, median s)
  for (int m : o.verify_positions)
    verify_widths.emplace_back(
        m, time_verify(tf, cache, slot, ids, at, m, o.verify_reps, logits.data()));
  const double verify_ratio = mk_s / m1_s;

  // The decode steps in blocks of kBlockTokens, each followed by one pass of
  // `bench membw`'s read: on a shared machine the bandwidth moves by tens of
  // percent within seconds, so each block is set against the pass next to it in
  // time, and the fraction is the median of those pairs (the same statistic on
  // both sides; a best-of bandwidth against a mean rate would charge every
  // neighbour's burst to the decode step).
  // On a device the host's bandwidth is no limit of the step: no passes there.
  constexpr int kBlockTokens = 4;
  std::optional<ReadBandwidth> membw;
  if (cpu) membw.emplace(pool, kMembwMiB << 20);
  const double bytes = static_cast<double>(model->weight_bytes_per_token());
  kernels::KernelProfile* profile = cpu ? cpu->kernels().profile() : nullptr;
  if (profile) {
    profile->clear();
    pool.reset_timing();
  }
  tf.clear_profile();
  double decode_s = 0.0;
  std::vector<double> pass_gb_s, block_fraction;
  std::vector<double> handoff_ns;  // beside each pass: which placement the host gave us
  for (int i = 0; i < o.gen_tokens;) {
    const int n = std::min(kBlockTokens, o.gen_tokens - i);
    pool.set_timing(profile != nullptr);
    t0 = Clock::now();
    for (int j = 0; j < n; ++j, ++i) {
      b.clear();
      b.add_sequence(slot, &ids[at + i], 1, at + i, false, true);
      tf.forward(b, cache, logits.data());
    }
    const double block_s = seconds_since(t0);
    pool.set_timing(false);
    decode_s += block_s;
    if (!membw) continue;
    pass_gb_s.push_back(membw->pass());  // no kernel runs in it: the profile sees none of it
    if (const auto ns = measure_handoff_ns(pool, 200, 1)) handoff_ns.push_back(*ns);
    block_fraction.push_back(n * bytes / block_s / 1e9 / pass_gb_s.back());
  }
  const std::vector<PassProfileEntry> device_profile = tf.profile();
  std::vector<BatchRate> batch_rates;
  for (int n : o.batches)
    batch_rates.push_back(
        time_batched_decode(tf, cache, ids, n, o.prompt_tokens, o.gen_tokens, logits.data()));

  // Choosing a token from the last row's logits, per sampling mode and
  // temperature: reproducible mode's Gumbel-max choice (noise keyed by seed,
  // position and token over the whole vocabulary) against optimal mode's softmax
  // and inverse-CDF draw, each as a share of a decode step.
  const double step_ms = 1000.0 * decode_s / o.gen_tokens;
  const std::vector<float> row(logits.begin(), logits.begin() + V);
  struct SamplingCost {
    float temperature;
    double reproducible_ms, optimal_ms;
  };
  std::vector<SamplingCost> sampling;
  for (float temp : {0.7f, 1.0f}) {
    SamplingParams sp;
    sp.temperature = temp;
    GumbelSampler gumbel;
    SamplingDistribution dist;
    Rng rng(1);
    std::vector<float> work = row;
    std::vector<double> repro, optimal;
    for (int pos = 0; pos < 200; ++pos) {
      t0 = Clock::now();
      gumbel.choose(work.data(), V, sp, pos);
      repro.push_back(seconds_since(t0));
      t0 = Clock::now();
      dist.compute(work.data(), V, sp);
      dist.sample(rng);
      optimal.push_back(seconds_since(t0));
    }
    sampling.push_back({temp, 1000.0 * median(repro), 1000.0 * median(optimal)});
  }

  const double prefill_tps = o.prompt_tokens / prefill_s, decode_tps = o.gen_tokens / decode_s;
  fmt::print("prefill: {} tokens in {:.3f} s = {:.1f} tok/s\n", o.prompt_tokens, prefill_s,
             prefill_tps);
  fmt::print("decode: {} tokens in {:.3f} s = {:.2f} tok/s ({:.3f} ms/token)\n", o.gen_tokens,
             decode_s, decode_tps, 1000.0 * decode_s / o.gen_tokens);
  fmt::print("verify at context {}: M=1 {:.3f} ms, M={} {:.3f} ms, ratio {:.3f}\n", at,
             1000.0 * m1_s, o.k + 1, 1000.0 * mk_s, verify_ratio);
  for (const auto& [m, sec] : verify_widths)
    fmt::print("verify of {} positions: {:.3f} ms, {:.3f}x the M=1 step\n", m, 1000.0 * sec,
               sec / m1_s);
  for (const auto& r : batch_rates)
    fmt::print("batch {}: {:.3f} ms per step, {:.1f} tok/s\n", r.batch, r.step_ms, r.tok_per_s);
  double bw = 0.0, fraction = 0.0, bound_tps = 0.0;
  if (membw) {
    bw = median(pass_gb_s);
    fraction = median(block_fraction);
    bound_tps = bw * 1e9 / bytes;
    fmt::print(
        "weights read per token: {:.1f} MB; read bandwidth {:.2f} GB/s (median of {} passes "
        "between the decode steps, {:.2f}-{:.2f}) -> bound {:.2f} tok/s; decode at {:.1f}% of "
        "it (median of each {} steps against the pass after them)\n",
        bytes / 1e6, bw, pass_gb_s.size(), *std::min_element(pass_gb_s.begin(), pass_gb_s.end()),
        *std::max_element(pass_gb_s.begin(), pass_gb_s.end()), bound_tps, 100.0 * fraction,
        kBlockTokens);
    if (!handoff_ns.empty())
      fmt::print("core-to-core round trip: {:.0f} ns (median beside the passes, {:.0f}-{:.0f})\n",
                 median(handoff_ns), *std::min_element(handoff_ns.begin(), handoff_ns.end()),
                 *std::max_element(handoff_ns.begin(), handoff_ns.end()));
  } else {
    fmt::print("weights read per token: {:.1f} MB, {:.0f} GB/s at the decode rate\n", bytes / 1e6,
               bytes * decode_tps / 1e9);
  }
  for (const auto& c : sampling)
    fmt::print(
        "sampling a token of {} at T {}: reproducible {:.3f} ms ({:.2f}% of a decode step), "
        "optimal {:.3f} ms ({:.2f}%)\n",
        V, c.temperature, c.reproducible_ms, 100.0 * c.reproducible_ms / step_ms, c.optimal_ms,
        100.0 * c.optimal_ms / step_ms);
  nlohmann::json j;
  j["model"] = o.model;
  j["threads"] = pool.size();
  j["simd"] = cpu ? cpu->kernels().name() : "none";
  if (cpu)
    j["stream_prefetch"] = kernels::stream_prefetch_name(
        non_temporal ? kernels::StreamPrefetch::NonTemporal : kernels::StreamPrefetch::L2);
  j["device"] = o.device.device;
  j["kv_cache"] = o.kv;
  j["draft_quant"] = o.quant;
  j["packed_matrices"] = packing.matrices;
  j["pack_seconds"] = packing.seconds;
  j["prompt_tokens"] = o.prompt_tokens;
  j["gen_tokens"] = o.gen_tokens;
  j["prefill_tok_per_s"] = prefill_tps;
  j["decode_tok_per_s"] = decode_tps;
  j["verify_m"] = o.k + 1;
  j["verify_ms_m1"] = 1000.0 * m1_s;
  j["verify_ms_mk"] = 1000.0 * mk_s;
  j["verify_cost_ratio"] = verify_ratio;
  j["weight_bytes_per_token"] = bytes;
  j["verify"] = nlohmann::json::array();
  for (const auto& [m, sec] : verify_widths)
    j["verify"].push_back({{"positions", m}, {"ms", 1000.0 * sec}, {"ratio", sec / m1_s}});
  j["batches"] = nlohmann::json::array();
  for (const auto& r : batch_rates)
    j["batches"].push_back(
        {{"batch", r.batch}, {"step_ms", r.step_ms}, {"tok_per_s", r.tok_per_s}});
  if (membw) {
    j["bandwidth_gb_s"] = bw;
    j["bandwidth_bound_tok_per_s"] = bound_tps;
    j["bandwidth_gb_s_min"] = *std::min_element(pass_gb_s.begin(), pass_gb_s.end());
    j["bandwidth_gb_s_max"] = *std::max_element(pass_gb_s.begin(), pass_gb_s.end());
    j["bandwidth_fraction"] = fraction;
    if (!handoff_ns.empty()) j["handoff_round_trip_ns"] = median(handoff_ns);
  } else {
    j["weight_gb_s_at_decode_rate"] = bytes * decode_tps / 1e9;
  }
  j["sampling"] = nlohmann::json::array();
  for (const auto& c : sampling)
    j["sampling"].push_back({{"temperature", c.temperature},
                             {"reproducible_ms", c.reproducible_ms},
                             {"reproducible_share_of_step", c.reproducible_ms / step_ms},
                             {"optimal_ms", c.optimal_ms},
                             {"optimal_share_of_step", c.optimal_ms / step_ms}});
  if (!device_profile.empty())
    j["device_profile"] = report_device_profile(device_profile, o.gen_tokens, 1000.0 * decode_s);
  if (profile)
    j["profile"] = report_decode_profile(*profile, pool.timing(), pool.size(), o.gen_tokens,
                                         1000.0 * decode_s, bw);
  fmt::print("{}\n", j.dump());
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure memory bandwidth and model speed");
  cmd->require_subcommand(1);

  auto* membw = cmd->add_subcommand("membw", "Multi-threaded streaming read bandwidth");
  struct MembwOptions {
    int threads = 0;
    size_t mb = kMembwMiB;
  };
  auto bw = std::make_shared<MembwOptions>();
  membw->add_option("-t,--threads", bw->threads, "Threads (default: physical cores)");
  membw->add_option("--mb", bw->mb, "Buffer size in MiB (default 1024)")
      ->check(CLI::Range(16, 16384));
  membw->callback([bw] {
    ThreadPool pool(bw->threads);
    const double gbs = measure_read_bandwidth(pool, bw->mb << 20);
    const std::optional<double> handoff = measure_handoff_ns(pool);
    fmt::print("read bandwidth: {:.2f} GB/s ({} threads, {} MiB buffer)\n", gbs, pool.size(),
               bw->mb);
    nlohmann::json j{{"bandwidth_gb_s", gbs}, {"threads", pool.size()}};
    if (handoff) {
      fmt::print("core-to-core round trip: {:.0f} ns (threads 0 and 1)\n", *handoff);
      j["handoff_round_trip_ns"] = *handoff;
    }
    fmt::print("{}\n", j.dump());
  });

  auto* decode = cmd->add_subcommand("decode", "Prefill/decode speed and verification cost");
  auto opts = std::make_shared<DecodeOptions>();
  DecodeOptions& o = *opts;
  decode->add_option("-m,--model", o.model, "GGUF file or Hugging Face directory")->required();
  decode->add_option("-t,--threads", o.threads, "Threads (default: physical cores)");
  decode->add_option("--prompt", o.prompt_tokens, "Prompt tokens to prefill (default 128)");
  decode->add_option("--gen", o.gen_tokens, "Tokens to decode (default 64)");
  decode->add_option("-k", o.k, "Draft length: verification runs K+1 positions (default 5)");
  decode->add_option("--reps", o.verify_reps, "Repetitions of the verify timing (default 10)");
  decode
      ->add_option("--verify-positions", o.verify_positions,
                   "More verify widths to time against one position, e.g. 4,8,16")
      ->delimiter(',');
  decode
      ->add_option("--batch", o.batches,
                   "Also time decode steps of this many sequences at once (tok/s), e.g. 16,64")
      ->delimiter(',');
  decode->add_flag(
      "--profile", o.profile,
      "Time every kernel of the decode steps: per kernel kind (matmuls with their "
      "bandwidth), per layer, outside the kernels, thread pool idle time; with --device "
      "cuda, each kind of kernel with CUDA events, every pass eager");
  decode->add_option("--kv", o.kv, "KV cache type: f16 or f32 (default f16)")
      ->check(CLI::IsMember({"f16", "f32"}));
  decode
      ->add_option("--draft-quant", o.quant,
                   "Load the model as a draft model is loaded with this --draft-quant (q4_0 "
                   "or none, the default here), to time a model as it drafts")
      ->check(draft_quant_check());
  add_device_options(decode, o.device);
  decode->callback([opts] { run_decode_bench(*opts); });

  add_bench_spec_command(cmd);
  add_bench_serve_command(cmd);
  add_bench_agent_command(cmd);
}

}  // namespace tandem::cli
