// `tandem bench serve`: serving figures from one process, with the engine in
// process (no HTTP: the numbers are the engine's, not the network stack's).
//  1. Closed-loop load at 1, 4 and 16 concurrent requests (each finished
//     request is replaced at once), plain decoding and speculative decoding in
//     the same run, taking turns step by step: generated tokens/s, time to
//     first token and inter-token latency (p50, p99), acceptance, and whether
//     greedy outputs matched.
//  2. The prefix cache: requests sharing a long system prompt, run one after
//     another with and without prefix caching; the prefill time it saves.
// A table, then one JSON line.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/request_check.h"
#include "model/model.h"
#include "svg_chart.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Opts {
  std::string model;
  SpecCliOptions spec;
  DeviceCliOptions device;
  std::string prompts = "prompts/chat.jsonl";
  std::string levels = "1,4,16";
  int n = 64;
  int requests = 0;     // > 0: a level is this many requests
  double seconds = 10;  // otherwise: this many seconds of each mode's steps
  int reps = 1;
  int threads = 0;
  int system_tokens = 512;
  int prefix_requests = 8;
  std::string chart;
  SamplingParams sampling;
  std::optional<uint64_t> seed;
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Nearest-rank percentile (p in [0, 1]); 0 for no samples.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p * v.size()));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

std::vector<std::vector<int>> load_prompt_set(const Model& model, const std::string& path) {
  std::ifstream in(path);
  check(in.good(), "{}: cannot read the prompt file", path);
  std::vector<std::vector<int>> out;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    check(j.is_object() && j.contains("prompt") && j["prompt"].is_string(),
          "{}:{}: expected a JSON object with a string \"prompt\"", path, line_no);
    PromptOptions p;
    p.prompt = j["prompt"].get<std::string>();
    p.chat = j.value("chat", false);
    out.push_back(prompt_ids(model, p));
  }
  check(!out.empty(), "{}: no prompts", path);
  return out;
}

// What one request saw, on its loop's own clock (LoadLoop::busy_ms): when it was
// submitted, and when each piece of text arrived and in which engine step.
struct Trace {
  double submitted = 0;
  std::vector<std::pair<int, double>> pieces;
  int tokens = 0;  // generated so far (a request still running at the end counts too)
  bool finished = false;
  RequestResult result;
};

struct Level {
  std::string mode;
  int rep = 0;
  int concurrency = 0, requests = 0, mismatches = -1, compared = 0;
  // Generated tokens. With --seconds, the step that crossed the mark counts the
  // share of its tokens that its time within the mark is of its whole time, so
  // the count can be fractional (LoadLoop::step).
  double tokens = 0;
  double seconds = 0, ttft_p50 = 0, ttft_p99 = 0, itl_p50 = 0, itl_p99 = 0;
  double acceptance = 0, tokens_per_round = 0;
  // Rounds in which a finished request had drafts verified (probes included),
  // summed over the requests: how often speculation was tried.
  int drafting_rounds = 0;
  // Drafted tokens the engine verified during the level's steps, every request's
  // (the running ones' too, which drafting_rounds misses: at 16 requests none
  // finishes within ten seconds).
  int64_t drafted_tokens = 0;
  // Changes of the machine's speed the draft policy saw during the level
  // (speculative/speed_shift.h): each rescaled its measured costs.
  int speed_shifts = 0;
  std::vector<std::vector<int>> outputs;  // per request index; empty while unfinished

  double tok_per_s() const { return seconds > 0 ? tokens / seconds : 0; }
};

// Latencies from the traces: TTFT from submission to the first text; each later
// step's wait is shared by the pieces it delivered (a speculative round's tokens
// arrive together), as the engine's inter-token histogram counts them.
void summarise(const std::vector<Trace>& traces, Level& L) {
  std::vector<double> ttft, itl;
  int64_t drafted = 0, accepted = 0, decoded = 0, rounds = 0;
  for (const auto& t : traces) {
    L.tokens += t.tokens;
    L.outputs.push_back(t.finished ? t.result.tokens : std::vector<int>{});
    if (t.finished) {
      ++L.requests;
      drafted += t.result.stats.drafted;
      accepted += t.result.stats.accepted;
      decoded += t.result.stats.decoded();
      rounds += t.result.stats.rounds;
      L.drafting_rounds += t.result.stats.spec_rounds;
    }
    if (t.pieces.empty()) continue;
    ttft.push_back(t.pieces.front().second - t.submitted);
    size_t i = 0;
    while (i < t.pieces.size()) {
      size_t j = i;
      while (j < t.pieces.size() && t.pieces[j].first == t.pieces[i].first) ++j;
      if (i > 0) {
        const double gap = t.pieces[i].second - t.pieces[i - 1].second;
        for (size_t k = i; k < j; ++k) itl.push_back(gap / static_cast<double>(j - i));
      }
      i = j;
    }
  }
  L.ttft_p50 = percentile(ttft, 0.5);
  L.ttft_p99 = percentile(ttft, 0.99);
  L.itl_p50 = percentile(itl, 0.5);
  L.itl_p99 = percentile(itl, 0.99);
  L.acceptance = drafted ? double(accepted) / drafted : 0;
  L.tokens_per_round = rounds ? double(decoded) / rounds : 0;
}

EngineOptions engine_options(const Opts& o, const SpecCliOptions& spec, int concurrency,
                             int64_t longest_request) {
  EngineOptions eo;
  eo.max_batch = concurrency;
  eo.n_ctx = static_cast<int>(longest_request);
  eo.spec = spec_options(spec);
  eo.kv.kind = KVCacheConfig::Kind::Paged;
  eo.kv.block_size = 16;
  // Room for every request in flight at its longest (drafts included): the
  // figures measure batching, not preemption.
  eo.kv.n_positions = concurrency * (longest_request + kMaxDraft + 16);
  eo.forward_pass = forward_pass_factory(o.device);
  return eo;
}

// One mode's closed loop at one concurrency (each finished request replaced at
// once), stepped from outside so that two modes can take turns step by step
// (run_pair). Time is the loop's own: the sum of its engine steps, so that
// while the other mode steps its clock stands still.
class LoadLoop {
 public:
  // Builds the engine and warms it up. `requests` > 0: the level is that many
  // requests (the last ones drain the batch); 0: it is `seconds` of steps, with
  // `concurrency` requests in flight throughout.
  LoadLoop(const Model& target, ThreadPool& pool, const Opts& o, std::string mode,
           const SpecCliOptions& spec, int concurrency,
           const std::vector<std::vector<int>>& prompts)
      : o_(o), mode_(std::move(mode)), concurrency_(concurrency), prompts_(prompts) {
    size_t longest = 0;
    for (const auto& p : prompts) longest = std::max(longest, p.size());
    EngineOptions eo = engine_options(o, spec, concurrency, static_cast<int64_t>(longest) + o.n);
    SpecSetup setup = make_drafter(spec, target, pool, engine_cache_config(eo), eo.forward_pass);
    draft_model_ = std::move(setup.draft_model);
    engine_ = std::make_unique<Engine>(target, pool, eo, std::move(setup.drafter));
    warm_up();
  }

  double busy_ms() const { return busy_ms_; }
  bool done() const { return o_.requests > 0 ? finished_ >= o_.requests : busy_ms_ >= mark_ms(); }

  // Tops the batch up and runs one engine step.
  void step() {
    while (submitting() && submitted_ - finished_ < concurrency_) submit_next();
    ++step_no_;
    const double began_ms = busy_ms_;
    const int tokens_before = tokens_;
    step_t0_ = Clock::now();
    engine_->step();
    busy_ms_ += ms_between(step_t0_, Clock::now());
    if (began_ms >= mark_ms()) return;
    const double share = std::min(1.0, (mark_ms() - began_ms) / (busy_ms_ - began_ms));
    within_tokens_ += share * (tokens_ - tokens_before);
    if (busy_ms_ <= mark_ms()) within_finished_ = finished_;
  }

  // With --seconds, the level is exactly its first `seconds` of steps: the
  // tokens of the steps that ended within them, and of the step that crossed
  // the mark the share that its time before the mark is of its whole time.
  // Any rule that takes the crossing step whole or leaves it out charges one
  // mode a long step (a prefill) that the other escapes (docs/decisions.md,
  // "`bench serve` runs plain and speculative step by step"). Finished
  // requests are those of the steps that ended within the mark.
  Level result() const {
    Level L;
    L.mode = mode_;
    L.concurrency = concurrency_;
    L.seconds = busy_ms_ / 1000;
    summarise(traces_, L);
    L.drafted_tokens = static_cast<int64_t>(engine_->metrics().drafted_tokens - warm_drafted_);
    L.speed_shifts = engine_->runner().policy().speed_shifts() - warm_shifts_;
    if (o_.requests == 0 && busy_ms_ > 0) {
      L.seconds = std::min(busy_ms_, mark_ms()) / 1000;
      L.tokens = within_tokens_;
      L.requests = within_finished_;
    }
    return L;
  }

 private:
  bool submitting() const { return o_.requests == 0 || submitted_ < o_.requests; }
  // --seconds on the loop's clock.
  double mark_ms() const { return 1000.0 * o_.seconds; }
  // The loop's clock now, within the running step.
  double now_ms() const { return busy_ms_ + ms_between(step_t0_, Clock::now()); }

  // Fault the weights in, and run waves of this level's batch (requests like the
  // timed ones) until the draft policy has measured what it plans this batch
  // size with and, where it drafts, the rate guard has judged its drafted rounds
  // against plain ones, as in a server that has run for a while (its exploring
  // and judging rounds are paid once per process; in a level of a few seconds
  // they would be up to 7% of it). Both modes alike, outside the timing.
  void warm_up() {
    constexpr int kMaxWarmUpWaves = 6;
    const DraftPolicy& policy = engine_->runner().policy();
    for (int wave = 0, drafted = 1; wave < kMaxWarmUpWaves; ++wave) {
      const bool judged = drafted == 0 || policy.rate_guard().judged(concurrency_);
      if (wave > 0 && policy.explored(concurrency_) && judged) break;
      drafted = 0;
      for (int i = 0; i < concurrency_; ++i) {
        Request w;
        w.prompt = prompts_[static_cast<size_t>(i) % prompts_.size()];
        w.params.max_tokens = o_.n;
        w.on_finish = [&drafted](const RequestResult& res) { drafted += res.stats.drafted; };
        engine_->submit(std::move(w));
      }
      engine_->run();
    }
    warm_drafted_ = engine_->metrics().drafted_tokens;
    warm_shifts_ = engine_->runner().policy().speed_shifts();
  }

  // Request i has prompt i (cyclically) and seed + i in both modes, so the
  // modes' outputs for the same i can be compared.
  void submit_next() {
    const int i = submitted_++;
    traces_.emplace_back();
    Request r;
    r.prompt = prompts_[static_cast<size_t>(i) % prompts_.size()];
    r.params.max_tokens = o_.n;
    r.params.sampling = o_.sampling;
    r.params.sampling.seed = (o_.seed ? *o_.seed : 1) + static_cast<uint64_t>(i);
    // traces_ grows while requests run, so the callbacks find theirs by index.
    r.on_text = [this, i](const std::string&) {
      traces_[i].pieces.emplace_back(step_no_, now_ms());
    };
    r.on_token = [this, i](const TokenOutput&) {
      ++traces_[i].tokens;
      ++tokens_;
    };
    r.on_finish = [this, i](const RequestResult& res) {
      traces_[i].result = res;
      traces_[i].finished = true;
      ++finished_;
    };
    traces_[i].submitted = busy_ms_;
    engine_->submit(std::move(r));
  }

  const Opts& o_;
  std::string mode_;
  int concurrency_;
  const std::vector<std::vector<int>>& prompts_;
  std::unique_ptr<Model> draft_model_;  // the drafter's, when it is a model; outlives the engine
  std::unique_ptr<Engine> engine_;
  std::vector<Trace> traces_;
  // Of the first --seconds of steps: the tokens emitted (the crossing step's
  // pro rata) and the requests finished by the steps that ended within them.
  double within_tokens_ = 0;
  int within_finished_ = 0;
  int tokens_ = 0;             // emitted by the timed requests so far
  uint64_t warm_drafted_ = 0;  // the engine's drafted tokens after the warm-up
  int warm_shifts_ = 0;        // the policy's speed shifts after the warm-up
  int submitted_ = 0, finished_ = 0, step_no_ = 0;
  double busy_ms_ = 0;
  Clock::time_point step_t0_;  // when the running step began
};

// Plain and speculative at one level, taking turns step by step: the mode whose
// clock is behind steps next, so both see the same seconds of the machine. On a
// shared machine whose speed moves by ±5% within seconds, levels run one after
// the other compare two different machines; interleaved, a neighbour's burst
// slows both.
std::pair<Level, Level> run_pair(LoadLoop& plain, LoadLoop& spec) {
  while (!plain.done() || !spec.done()) {
    LoadLoop& next =
        spec.done() || (!plain.done() && plain.busy_ms() <= spec.busy_ms()) ? plain : spec;
    next.step();
  }
  return {plain.result(), spec.result()};
}

struct PrefixResult {
  double prefill_ms_off = 0, prefill_ms_on = 0, ttft_ms_off = 0, ttft_ms_on = 0, hit_rate = 0;
  int prompt_tokens = 0;
};

// Requests sharing a long system prompt, one after another, each generating one
// token: the prefill work is all there is.
PrefixResult run_prefix(const Model& target, ThreadPool& pool, const Opts& o) {
  const Tokenizer& tok = target.require_tokenizer();
  std::string system;
  const std::string paragraph =
      "You are the support assistant of a hardware store. Answer questions about tools, "
      "materials and opening hours politely and precisely; when unsure, say so and suggest "
      "asking a member of staff. ";
  while (static_cast<int>(tok.encode(system, false, false).size()) < o.system_tokens)
    system += paragraph;
  std::vector<std::vector<int>> prompts;
  for (int i = 0; i < o.prefix_requests; ++i) {
    const std::string question = fmt::format("Question {}: do you sell size {} screws?", i, i + 3);
    std::vector<int> ids;
    try {
      auto family = detect_chat_template(target.chat_template());
      ids = tok.encode(render_chat(family, target.chat_template(),
                                   {{"system", system}, {"user", question}}, true),
                       false, true);
    } catch (const Error&) {  // no known chat template: plain text
      ids = tok.encode(system + "\n" + question, tok.add_bos(), false);
    }
    prompts.push_back(std::move(ids));
  }
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  PrefixResult out;
  out.prompt_tokens = static_cast<int>(longest);
  for (bool cache_on : {false, true}) {
    EngineOptions eo = engine_options(o, SpecCliOptions{}, 1, static_cast<int64_t>(longest) + 1);
    eo.prefix_cache = cache_on;
    Engine engine(target, pool, eo);
    double prefill = 0, ttft = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request r;
      r.prompt = prompts[i];
      r.params.max_tokens = 1;
      const auto t0 = Clock::now();
      const int id = engine.submit(std::move(r));
      engine.run();
      const RequestResult res = *engine.take_result(id);
      if (i == 0) continue;  // the first request fills the cache in both runs
      prefill += res.stats.prefill_ms;
      ttft += ms_between(t0, Clock::now());
    }
    const double n = static_cast<double>(prompts.size() - 1);
    (cache_on ? out.prefill_ms_on : out.prefill_ms_off) = prefill / n;
    (cache_on ? out.ttft_ms_on : out.ttft_ms_off) = ttft / n;
    if (cache_on) {
      const auto& m = engine.metrics();
      out.hit_rate =
          m.prefix_queried_tokens ? double(m.prefix_hit_tokens) / m.prefix_queried_tokens : 0;
    }
  }
  return out;
}

std::vector<int> parse_levels(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    int v = 0;
    try {
      size_t used = 0;
      v = std::stoi(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      fail("--concurrency: '{}' is not a number", item);
    }
    check(v >= 1 && v <= 256, "--concurrency: {} is outside [1, 256]", v);
    out.push_back(v);
  }
  check(!out.empty(), "--concurrency: no levels given");
  return out;
}

void print_row(const Level& L) {
  fmt::print(
      "{:>6} {:>5} {:>5} {:>7.0f} {:>8.1f} {:>6.0f} ms {:>6.0f} ms {:>5.1f} ms {:>5.1f} ms "
      "{:>7.3f} {:>7.2f} {:>7}\n",
      L.mode, L.concurrency, L.requests, L.tokens, L.tok_per_s(), L.ttft_p50, L.ttft_p99, L.itl_p50,
      L.itl_p99, L.acceptance, L.tokens_per_round,
      L.mismatches < 0    ? ""
      : L.mismatches == 0 ? fmt::format("{}/{}", L.compared, L.compared)
                          : fmt::format("{} diff", L.mismatches));
}

double speedup_of(const Level& plain, const Level& spec) {
  return plain.tok_per_s() > 0 ? spec.tok_per_s() / plain.tok_per_s() : 0;
}

nlohmann::json level_json(const Level& L) {
  nlohmann::json j = {{"mode", L.mode},
                      {"rep", L.rep},
                      {"concurrency", L.concurrency},
                      {"requests", L.requests},
                      {"generated_tokens", L.tokens},
                      {"seconds", L.seconds},
                      {"tok_per_s", L.tok_per_s()},
                      {"ttft_ms_p50", L.ttft_p50},
                      {"ttft_ms_p99", L.ttft_p99},
                      {"itl_ms_p50", L.itl_p50},
                      {"itl_ms_p99", L.itl_p99},
                      {"acceptance_rate", L.acceptance},
                      {"tokens_per_round", L.tokens_per_round},
                      {"request_drafting_rounds", L.drafting_rounds},
                      {"drafted_tokens", L.drafted_tokens},
                      {"speed_shifts", L.speed_shifts}};
  if (L.mismatches >= 0) {
    j["outputs_identical"] = L.mismatches == 0;
    j["outputs_compared"] = L.compared;
  }
  return j;
}

void run_bench_serve(const Opts& o) {
  check(o.n >= 1, "-n: the tokens per request must be >= 1, got {}", o.n);
  const std::vector<int> levels = parse_levels(o.levels);
  SpecCliOptions spec = o.spec;
  if (spec.draft.empty()) spec.draft = "ngram";
  spec_options(spec);  // validate -k before the long run
  check_sampling(o.sampling);
  (void)forward_pass_factory(o.device);  // --device cuda where it cannot run: fail first
  auto target = load_model(o.model);
  auto prompts = load_prompt_set(*target, o.prompts);
  ThreadPool pool(o.threads);
  const char* lookup = draft_lookup_name(draft_lookup(spec));  // in front of a draft model
  fmt::print(
      "target {}\ndraft  {} (k={}, lookups first: {})\nprompts {} ({}), {} tokens per request, "
      "{} threads, {}; engine in process (no HTTP)\n\n",
      target->path(), spec.draft, spec.k, lookup, o.prompts, prompts.size(), o.n, pool.size(),
      o.sampling.greedy() ? "greedy" : fmt::format("temperature {}", o.sampling.temperature));
  fmt::print("{:>6} {:>5} {:>5} {:>7} {:>8} {:>9} {:>9} {:>8} {:>8} {:>7} {:>7} {:>7}\n", "mode",
             "conc", "reqs", "tokens", "tok/s", "ttft p50", "ttft p99", "itl p50", "itl p99",
             "accept", "tok/rnd", "same");
  std::vector<Level> rows;
  // Per level: each rep's speedup, and the speedup pooled over the reps (all
  // speculative tokens over their seconds, against the same for plain). Plain
  // and speculative take turns step by step (run_pair), so a drift of the
  // machine's speed hits both.
  nlohmann::json speedup = nlohmann::json::object(), per_rep = nlohmann::json::object();
  std::string summary;
  std::vector<double> chart_x, chart_plain, chart_spec, chart_speedup;
  for (int c : levels) {
    Level plain_pooled, spec_pooled;  // tokens and seconds of all reps
    std::vector<double> ratios;
    for (int rep = 0; rep < o.reps; ++rep) {
      LoadLoop plain_loop(*target, pool, o, "plain", SpecCliOptions{}, c, prompts);
      LoadLoop spec_loop(*target, pool, o, "spec", spec, c, prompts);
      auto [plain, sp] = run_pair(plain_loop, spec_loop);
      plain.rep = sp.rep = rep;
      if (o.sampling.greedy()) {
        sp.mismatches = 0;
        for (size_t i = 0; i < std::min(plain.outputs.size(), sp.outputs.size()); ++i) {
          if (plain.outputs[i].empty() || sp.outputs[i].empty()) continue;  // unfinished
          ++sp.compared;
          sp.mismatches += plain.outputs[i] != sp.outputs[i];
        }
      }
      print_row(plain);
      print_row(sp);
      ratios.push_back(speedup_of(plain, sp));
      plain_pooled.tokens += plain.tokens;
      plain_pooled.seconds += plain.seconds;
      spec_pooled.tokens += sp.tokens;
      spec_pooled.seconds += sp.seconds;
      rows.push_back(std::move(plain));
      rows.push_back(std::move(sp));
    }
    const double pooled = speedup_of(plain_pooled, spec_pooled);
    speedup[std::to_string(c)] = pooled;
    chart_x.push_back(c);
    chart_plain.push_back(plain_pooled.tok_per_s());
    chart_spec.push_back(spec_pooled.tok_per_s());
    chart_speedup.push_back(pooled);
    per_rep[std::to_string(c)] = ratios;
    summary += fmt::format(" {:.2f}x at {}", pooled, c);
    if (o.reps > 1) {
      const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
      summary += fmt::format(" (reps {:.2f}-{:.2f}x)", *lo, *hi);
    }
  }
  fmt::print("\nspeculative / plain tokens/s:{}\n", summary);
  if (!o.chart.empty()) {
    const std::string drafts = spec.tree > 0 ? fmt::format("trees +{}", spec.tree) : "chains";
    const std::string temp = o.sampling.greedy()
                                 ? std::string("greedy")
                                 : fmt::format("temperature {}", o.sampling.temperature);
    write_svg_chart(o.chart,
                    fmt::format("serving: {}, k={}, {}, {}", o.prompts, spec.k, drafts, temp),
                    "concurrent requests", chart_x,
                    {{"plain tok/s", "#7f7f7f", chart_plain, false},
                     {"speculative tok/s", "#1f77b4", chart_spec, false},
                     {"speedup", "#d62728", chart_speedup, true}});
    fmt::print("chart written to {}\n", o.chart);
  }

  const PrefixResult px = run_prefix(*target, pool, o);
  const double saved = px.prefill_ms_off - px.prefill_ms_on;
  fmt::print(
      "\nprefix cache: {} requests sharing a {}-token system prompt (prompts of {} tokens), "
      "one at a time\n  prefill per request {:.1f} ms without, {:.1f} ms with: saves {:.1f} ms "
      "({:.0f}%); time to first token {:.1f} -> {:.1f} ms; hit rate {:.2f}\n",
      o.prefix_requests, o.system_tokens, px.prompt_tokens, px.prefill_ms_off, px.prefill_ms_on,
      saved, px.prefill_ms_off > 0 ? 100 * saved / px.prefill_ms_off : 0, px.ttft_ms_off,
      px.ttft_ms_on, px.hit_rate);

  nlohmann::json out;
  out["model"] = target->path();
  out["draft"] = spec.draft;
  out["draft_quant"] = spec.draft_quant;
  out["k"] = spec.k == "auto" ? nlohmann::json("auto") : nlohmann::json(spec_options(spec).k);
  out["lookup"] = lookup;
  out["tree_extra"] = spec.tree;
  out["prompts"] = o.prompts;
  out["max_tokens"] = o.n;
  out["threads"] = pool.size();
  out["in_process"] = true;
  out["levels"] = nlohmann::json::array();
  for (const auto& L : rows) out["levels"].push_back(level_json(L));
  out["spec_speedup"] = speedup;
  out["spec_speedup_per_rep"] = per_rep;
  out["prefix_cache"] = {{"requests", o.prefix_requests},
                         {"system_tokens", o.system_tokens},
                         {"prompt_tokens", px.prompt_tokens},
                         {"prefill_ms_without", px.prefill_ms_off},
                         {"prefill_ms_with", px.prefill_ms_on},
                         {"prefill_ms_saved", saved},
                         {"ttft_ms_without", px.ttft_ms_off},
                         {"ttft_ms_with", px.ttft_ms_on},
                         {"hit_rate", px.hit_rate}};
  fmt::print("\n{}\n", out.dump());
}

}  // namespace

void add_bench_serve_command(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "serve",
      "Serving throughput and latency at several concurrencies, plain vs speculative, "
      "and the prefix cache's savings (engine in process)");
  auto opts = std::make_shared<Opts>();
  Opts& o = *opts;
  cmd->add_option("-m,--model", o.model, "Target model (GGUF or HF directory)")->required();
  add_spec_options(cmd, o.spec);
  add_device_options(cmd, o.device);
  cmd->add_option("--prompts", o.prompts, "JSONL prompt set: {\"prompt\": ..., \"chat\": bool}")
      ->capture_default_str();
  cmd->add_option("-n,--max-tokens", o.n, "Tokens generated per request")->capture_default_str();
  cmd->add_option("--chart", o.chart,
                  "Write an SVG chart of plain and speculative tokens/s against concurrency");
  cmd->add_option("--concurrency", o.levels, "Comma-separated concurrency levels")
      ->capture_default_str();
  cmd->add_option("--seconds", o.seconds,
                  "Seconds of steps per mode and level, the batch kept full throughout; the "
                  "step that crosses the mark counts its tokens pro rata")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  cmd->add_option("--requests", o.requests,
                  "Requests per level instead of --seconds (the last ones drain the batch)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--reps", o.reps,
                  "Runs of each level, plain and speculative taking turns (the speedup pools "
                  "them)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("-t,--threads", o.threads, "Threads (default: physical cores)");
  cmd->add_option("--system-tokens", o.system_tokens,
                  "Length of the shared system prompt in the prefix cache test")
      ->capture_default_str();
  cmd->add_option("--prefix-requests", o.prefix_requests,
                  "Requests in the prefix cache test (the first one fills the cache)")
      ->check(CLI::Range(2, 1000))
      ->capture_default_str();
  add_sampling_options(cmd, o.sampling, o.seed);
  cmd->callback([opts] { run_bench_serve(*opts); });
}

}  // namespace tandem::cli
