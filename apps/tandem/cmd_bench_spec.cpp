// `tandem bench spec`: the design's W1 workload (one request at a time) over a
// prompt set, plain decoding and speculative decoding side by side in one
// process. Per K: tokens/s both ways, speedup, acceptance, tokens per round, the
// measured draft cost c and verify cost v, and the speedup predicted from them
// by (1 - a^(K+1)) / ((1 - a)(K c + v)) (Leviathan et al., 2023). The
// configurations take turns prompt by prompt (see run_interleaved). A prompt
// may carry a JSON schema: its requests then decode under that constraint in
// every configuration, and the constraint's own time is reported per token.
// Sampled runs may compare sampling modes (--modes): each mode's speculative
// rows against its own plain decoding; reproducible mode's outputs are checked
// equal to its plain outputs, as greedy ones are.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/request_check.h"
#include "model/model.h"
#include "structured/grammar_constraint.h"
#include "structured/json_schema.h"
#include "svg_chart.h"

namespace tandem::cli {
namespace {

struct Opts {
  std::string model;
  SpecCliOptions spec;
  DeviceCliOptions device;
  std::string k_list = "1,2,3,4,5,6,8,auto";
  std::string tree_list = "0";
  std::string mode_list;  // "": the --sampling-mode alone
  std::string prompts = "prompts/code.jsonl";
  int n = 128;
  int threads = 0;
  int limit = 0;
  int reps = 1;
  bool unconstrained = false;
  std::string chart;
  SamplingParams sampling;
  std::optional<uint64_t> seed;
};

struct Prompt {
  std::vector<int> ids;
  std::shared_ptr<const structured::Grammar> grammar;  // null: unconstrained
};

// One line of the prompt set: {"prompt": text, "chat": bool} and optionally
// "json_schema": a schema, or "json_object": true (any JSON object), as the
// server's response_format would constrain it.
std::vector<Prompt> load_prompts(const Model& model, const std::string& path, int limit,
                                 bool unconstrained) {
  std::ifstream in(path);
  check(in.good(), "{}: cannot read the prompt file", path);
  std::vector<Prompt> out;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json j;  // ordered: a schema's properties keep their order
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const std::exception& e) {
      fail("{}:{}: invalid JSON: {}", path, line_no, e.what());
    }
    check(j.is_object() && j.contains("prompt") && j["prompt"].is_string(),
          "{}:{}: expected an object with a string \"prompt\"", path, line_no);
    PromptOptions p;
    p.prompt = j["prompt"].get<std::string>();
    p.chat = j.value("chat", false);
    Prompt prompt{prompt_ids(model, p), nullptr};
    try {
      if (!unconstrained && j.contains("json_schema"))
        prompt.grammar = structured::compile_json_schema(j["json_schema"]);
      else if (!unconstrained && j.value("json_object", false))
        prompt.grammar = structured::any_json_object_grammar();
    } catch (const std::exception& e) {
      fail("{}:{}: json_schema: {}", path, line_no, e.what());
    }
    out.push_back(std::move(prompt));
    if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
  }
  check(!out.empty(), "{}: no prompts", path);
  return out;
}

// A TokenConstraint that adds the time spent in it (and in its forks, which
// the drafters and the verifier make) to a shared total.
class TimedConstraint final : public TokenConstraint {
 public:
  TimedConstraint(std::unique_ptr<TokenConstraint> inner, std::shared_ptr<double> total_ms)
      : inner_(std::move(inner)), total_ms_(std::move(total_ms)) {}

  std::unique_ptr<TokenConstraint> fork() const override {
    Timer t(*total_ms_);
    return std::make_unique<TimedConstraint>(inner_->fork(), total_ms_);
  }
  bool mask(float* logits, int n_vocab) const override {
    Timer t(*total_ms_);
    return inner_->mask(logits, n_vocab);
  }
  bool allows(int token) const override {
    Timer t(*total_ms_);
    return inner_->allows(token);
  }
  void advance(int token) override {
    Timer t(*total_ms_);
    inner_->advance(token);
  }

 private:
  struct Timer {
    double& total;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Timer() {
      total += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                   .count();
    }
  };
  std::unique_ptr<TokenConstraint> inner_;
  std::shared_ptr<double> total_ms_;
};

// One configuration's totals over the prompt set.
struct Run {
  int generated = 0, decoded = 0, rounds = 0, spec_rounds = 0, drafted = 0, accepted = 0,
      rejections = 0;
  double decode_ms = 0, draft_ms = 0, verify_ms = 0, spec_verify_ms = 0;
  int constrained = 0;       // tokens generated under a constraint
  double constraint_ms = 0;  // time spent in the constraints
  std::vector<std::vector<int>> outputs;

  double tok_per_s() const { return decode_ms > 0 ? decoded * 1000.0 / decode_ms : 0; }
  double step_ms() const { return decoded ? decode_ms / decoded : 0; }
  double constraint_ms_per_token() const { return constrained ? constraint_ms / constrained : 0; }
  // The constraints' time per token against a plain decode step (which
  // includes masking its one row).
  double constraint_share_of(const Run& plain) const {
    return plain.step_ms() > 0 ? constraint_ms_per_token() / plain.step_ms() : 0;
  }
};

// One configuration (plain, or speculative with one K): its engine and drafter,
// and its totals so far.
struct Config {
  std::string k;  // "" for plain decoding
  int tree = 0;   // draft trees: positions beyond the main chain (0: chains)
  SamplingMode mode = SamplingMode::Reproducible;
  SpecSetup setup;
  std::unique_ptr<Engine> engine;
  Run run;
};

std::unique_ptr<Config> make_config(const Model& target, ThreadPool& pool, const Opts& o,
                                    const std::string& k, int tree, SamplingMode mode,
                                    const std::vector<Prompt>& prompts) {
  auto c = std::make_unique<Config>();
  c->k = k;
  c->tree = tree;
  c->mode = mode;
  SpecCliOptions spec;
  if (!k.empty()) {
    spec = o.spec;
    spec.k = k;
    spec.tree = tree;
  }
  EngineOptions eo;
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.ids.size());
  eo.n_ctx = static_cast<int>(longest) + o.n;
  eo.spec = spec_options(spec);
  eo.spec.opt_out = false;  // measure exactly the K asked for
  eo.forward_pass = forward_pass_factory(o.device);
  c->setup = make_drafter(spec, target, pool, engine_cache_config(eo), eo.forward_pass);
  c->engine = std::make_unique<Engine>(target, pool, eo, std::move(c->setup.drafter));
  return c;
}

void run_prompt(Config& c, const Opts& o, const Prompt& prompt, size_t index, bool keep_output,
                const std::shared_ptr<const structured::TokenVocabulary>& vocab) {
  Request r;
  r.prompt = prompt.ids;
  r.params.max_tokens = o.n;
  r.params.sampling = o.sampling;
  r.params.sampling.seed = (o.seed ? *o.seed : 1) + index;
  r.params.sampling.mode = c.mode;
  auto constraint_ms = std::make_shared<double>(0);
  if (prompt.grammar)
    r.params.constraint = std::make_shared<TimedConstraint>(
        structured::GrammarConstraint::start(prompt.grammar, vocab)->fork(), constraint_ms);
  const int id = c.engine->submit(std::move(r));
  c.engine->run();
  RequestResult res = *c.engine->take_result(id);
  const auto& st = res.stats;
  Run& run = c.run;
  if (prompt.grammar) {
    run.constrained += static_cast<int>(res.tokens.size());
    run.constraint_ms += *constraint_ms;
  }
  run.generated += static_cast<int>(res.tokens.size());
  run.decoded += st.decoded();
  run.rounds += st.rounds;
  run.spec_rounds += st.spec_rounds;
  run.drafted += st.drafted;
  run.accepted += st.accepted;
  run.rejections += st.rejections;
  run.decode_ms += st.decode_ms;
  run.draft_ms += st.draft_ms;
  run.verify_ms += st.verify_ms;
  run.spec_verify_ms += st.spec_verify_ms;
  if (keep_output) run.outputs.push_back(std::move(res.tokens));
}

// Every prompt runs under every configuration before the next prompt starts,
// in an order that rotates from prompt to prompt: the machine's slow and fast
// spells (it is shared) then fall on all configurations alike instead of on
// whichever happened to run at that time.
void run_interleaved(std::vector<std::unique_ptr<Config>>& configs, const Opts& o,
                     const std::vector<Prompt>& prompts,
                     const std::shared_ptr<const structured::TokenVocabulary>& vocab) {
  const size_t n = configs.size();
  size_t turn = 0;
  for (int rep = 0; rep < o.reps; ++rep)
    for (size_t i = 0; i < prompts.size(); ++i, ++turn)
      for (size_t j = 0; j < n; ++j)
        run_prompt(*configs[(turn + j) % n], o, prompts[i], i, rep == 0, vocab);
}

struct Row {
  std::string k;
  int tree = 0;
  SamplingMode mode = SamplingMode::Reproducible;
  // K, and a tree's extra positions: "3", "auto+t4".
  std::string label() const { return tree > 0 ? fmt::format("{}+t{}", k, tree) : k; }
  double spec_tps = 0, speedup = 0, acceptance = 0, alpha = 0, tokens_per_round = 0, c = 0, v = 0,
         predicted = 0, mean_k = 0, draft_rounds = 0;
  int mismatches = 0;
};

Row summarise(const Config& config, const Run& plain) {
  const Run& spec = config.run;
  Row r;
  r.k = config.k;
  r.tree = config.tree;
  r.mode = config.mode;
  r.spec_tps = spec.tok_per_s();
  r.speedup = plain.tok_per_s() > 0 ? r.spec_tps / plain.tok_per_s() : 0;
  r.acceptance = spec.drafted ? double(spec.accepted) / spec.drafted : 0;
  // Per-token acceptance probability: each judged draft is a Bernoulli trial
  // until the first rejection (maximum-likelihood estimate).
  r.alpha = spec.accepted + spec.rejections
                ? double(spec.accepted) / (spec.accepted + spec.rejections)
                : 0;
  r.tokens_per_round = spec.rounds ? double(spec.decoded) / spec.rounds : 0;
  r.draft_rounds = spec.rounds ? double(spec.spec_rounds) / spec.rounds : 0;
  r.mean_k = spec.spec_rounds ? double(spec.drafted) / spec.spec_rounds : 0;
  // Costs relative to one plain decode step: c per draft step, v per verify pass
  // of a drafting round, v1 per round that drafted nothing (an n-gram miss, a
  // request that opted out).
  const double step_ms = plain.step_ms();
  double v1 = 1;
  if (step_ms > 0 && spec.spec_rounds > 0) {
    r.c = spec.draft_ms / spec.spec_rounds / std::max(r.mean_k, 1.0) / step_ms;
    r.v = spec.spec_verify_ms / spec.spec_rounds / step_ms;
    if (spec.rounds > spec.spec_rounds)
      v1 = (spec.verify_ms - spec.spec_verify_ms) / (spec.rounds - spec.spec_rounds) / step_ms;
  }
  // Leviathan et al.: (1 - a^(g+1)) / ((1 - a)(g c + v)) for rounds that draft g
  // tokens, mixed with the fraction f of rounds that draft none.
  const double g = r.mean_k, a = r.alpha, f = r.draft_rounds;
  const double tokens = a < 1 ? (1 - std::pow(a, g + 1)) / (1 - a) : g + 1;
  const double cost = f * (g * r.c + r.v) + (1 - f) * v1;
  r.predicted = cost > 0 ? (f * tokens + (1 - f)) / cost : 0;
  for (size_t i = 0; i < plain.outputs.size(); ++i)
    r.mismatches += plain.outputs[i] != spec.outputs[i];
  return r;
}

// Speedup against K, one line per tree size (chains first) and sampling mode,
// and the first line's acceptance rate; the title names the sampling temperature.
void write_chart(const Opts& o, const std::vector<Row>& rows, const std::vector<int>& trees,
                 const std::vector<SamplingMode>& modes) {
  static const char* kColours[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"};
  auto line = [&](SamplingMode mode, int tree, auto value) {
    std::vector<double> y;
    for (const auto& r : rows)
      if (r.k != "auto" && r.tree == tree && r.mode == mode) y.push_back(value(r));
    return y;
  };
  std::vector<double> x;
  for (const auto& r : rows)
    if (r.k != "auto" && r.tree == trees.front() && r.mode == modes.front())
      x.push_back(std::stoi(r.k));
  if (x.empty()) return;
  std::vector<ChartSeries> series;
  size_t colour = 0;
  for (SamplingMode mode : modes)
    for (int tree : trees) {
      std::string label = tree > 0 ? fmt::format("speedup, trees +{}", tree) : "speedup, chains";
      if (modes.size() > 1) label += fmt::format(", {}", sampling_mode_name(mode));
      series.push_back({label, kColours[colour++ % 5],
                        line(mode, tree, [](const Row& r) { return r.speedup; }), false});
    }
  series.push_back({"acceptance rate", "#d62728",
                    line(modes.front(), trees.front(), [](const Row& r) { return r.acceptance; }),
                    true});
  const std::string temp = o.sampling.greedy()
                               ? std::string("greedy")
                               : fmt::format("temperature {}", o.sampling.temperature);
  write_svg_chart(o.chart, fmt::format("speculative decoding: {}, {}", o.prompts, temp),
                  "K (drafted tokens per round)", x, series);
  fmt::print("\nchart written to {}\n", o.chart);
}

}  // namespace

void add_bench_spec_command(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "spec", "Plain vs speculative decoding over a prompt set, per draft length K");
  auto opts = std::make_shared<Opts>();
  Opts& o = *opts;
  cmd->add_option("-m,--model", o.model, "Target model (GGUF or HF directory)")->required();
  cmd->add_option("-d,--draft", o.spec.draft, "Draft model, or 'ngram'")->required();
  cmd->add_option("--draft-vocab", o.spec.draft_vocab,
                  "Draft model: propose only the first N token ids (default as for generate)");
  add_draft_model_flags(cmd, o.spec);
  cmd->add_option("-k", o.k_list, "Comma-separated draft lengths, 'auto' allowed")
      ->capture_default_str();
  cmd->add_option("--tree", o.tree_list,
                  "Comma-separated draft-tree sizes (positions beyond the main chain; 0 = "
                  "chains): each K runs with each")
      ->capture_default_str();
  cmd->add_option("--prompts", o.prompts,
                  "JSONL prompt set: {\"prompt\": ..., \"chat\": bool, \"json_schema\": {...} or "
                  "\"json_object\": true}")
      ->capture_default_str();
  cmd->add_option("-n,--max-tokens", o.n, "Tokens per prompt")->capture_default_str();
  cmd->add_option("--limit", o.limit, "Use only the first N prompts");
  cmd->add_option("--reps", o.reps, "Run the prompt set this many times")->capture_default_str();
  cmd->add_option("-t,--threads", o.threads, "Threads (default: physical cores)");
  cmd->add_flag("--unconstrained", o.unconstrained,
                "Ignore the prompts' JSON schemas (the same prompts, free to answer)");
  cmd->add_option("--chart", o.chart, "Write an SVG chart of speedup and acceptance against K");
  cmd->add_option("--modes", o.mode_list,
                  "Sampled runs: comma-separated sampling modes to compare (reproducible, "
                  "optimal), each against its own plain decoding; default: --sampling-mode");
  add_sampling_options(cmd, o.sampling, o.seed);
  add_device_options(cmd, o.device);
  cmd->callback([opts] {
    const Opts& o = *opts;
    (void)forward_pass_factory(o.device);  // --device cuda where it cannot run: fail first
    auto target = load_model(o.model);
    auto prompts = load_prompts(*target, o.prompts, o.limit, o.unconstrained);
    std::shared_ptr<const structured::TokenVocabulary> vocab;
    int n_constrained = 0;
    for (const auto& p : prompts) n_constrained += p.grammar != nullptr;
    if (n_constrained > 0)
      vocab = structured::TokenVocabulary::from_tokenizer(target->require_tokenizer(),
                                                          target->config().vocab_size);
    ThreadPool pool(o.threads);
    std::vector<std::string> ks;
    std::stringstream ss(o.k_list);
    for (std::string k; std::getline(ss, k, ',');)
      if (!k.empty()) ks.push_back(k);
    check(!ks.empty(), "-k: no draft lengths given");
    std::vector<int> trees;
    std::stringstream ts(o.tree_list);
    for (std::string t; std::getline(ts, t, ',');) {
      if (t.empty()) continue;
      try {
        trees.push_back(std::stoi(t));
      } catch (const std::exception&) {
        fail("--tree: '{}' is not a number", t);
      }
    }
    check(!trees.empty(), "--tree: no tree sizes given");
    for (const auto& k : ks)  // validate before the long run
      for (int t : trees) spec_options({.draft = o.spec.draft, .k = k, .tree = t});
    check(o.reps >= 1, "--reps must be at least 1, got {}", o.reps);
    check_sampling(o.sampling);

    fmt::print(
        "target {}\ndraft  {}\nprompts {} ({} prompts, {} under a JSON schema), {} tokens "
        "each, {} threads, {}\n",
        target->path(), o.spec.draft, o.prompts, prompts.size(), n_constrained, o.n, pool.size(),
        o.sampling.greedy() ? "greedy" : fmt::format("temperature {}", o.sampling.temperature));
    // Greedy requests sample nothing: one mode is all there is to measure.
    std::vector<SamplingMode> modes;
    std::stringstream ms(o.mode_list);
    for (std::string m; std::getline(ms, m, ',');)
      if (!m.empty()) modes.push_back(parse_sampling_mode(m));
    if (modes.empty() || o.sampling.greedy()) modes = {o.sampling.mode};

    fmt::print(
        "target {}\ndraft  {}\nprompts {} ({} prompts, {} under a JSON schema), {} tokens "
        "each, {} threads, {}\n",
        target->path(), o.spec.draft, o.prompts, prompts.size(), n_constrained, o.n, pool.size(),
        o.sampling.greedy() ? "greedy" : fmt::format("temperature {}", o.sampling.temperature));
    std::vector<std::unique_ptr<Config>> configs;
    for (SamplingMode mode : modes) {
      configs.push_back(make_config(*target, pool, o, "", 0, mode, prompts));
      for (int t : trees)
        for (const auto& k : ks)
          configs.push_back(make_config(*target, pool, o, k, t, mode, prompts));
    }
    run_interleaved(configs, o, prompts, vocab);
    // Each configuration's plain decoding: the first configuration of its mode.
    auto plain_of = [&](const Config& c) -> const Run& {
      for (const auto& p : configs)
        if (p->k.empty() && p->mode == c.mode) return p->run;
      return configs.front()->run;
    };
    const auto mode_label = [&](SamplingMode m) {
      return o.sampling.greedy() ? std::string("greedy") : std::string(sampling_mode_name(m));
    };
    for (const auto& c : configs)
      if (c->k.empty())
        fmt::print("plain decode ({}): {:.2f} tok/s ({} tokens)\n", mode_label(c->mode),
                   c->run.tok_per_s(), c->run.decoded);
    if (n_constrained > 0)
      for (const auto& c : configs)
        fmt::print("constraint, {:>5}: {:.3f} ms per token ({:.1f}% of a plain decode step)\n",
                   c->k.empty() ? "plain" : "K=" + Row{c->k, c->tree}.label(),
                   c->run.constraint_ms_per_token(),
                   100 * c->run.constraint_share_of(plain_of(*c)));
    fmt::print("\n");
    fmt::print("{:>12} {:>8} {:>9} {:>9} {:>8} {:>7} {:>6} {:>8} {:>6} {:>6} {:>9} {:>7} {:>6}\n",
               "mode", "K", "plain", "spec", "speedup", "accept", "alpha", "tok/rnd", "c", "v",
               "predicted", "effic", "same");
    // Outputs must equal plain decoding's where the choice is deterministic
    // (greedy, reproducible sampling); optimal sampling only in distribution.
    const auto checked = [&](SamplingMode m) {
      return o.sampling.greedy() || m == SamplingMode::Reproducible;
    };
    std::vector<Row> rows;
    std::vector<const Config*> row_configs;
    for (const auto& c : configs) {
      if (c->k.empty()) continue;
      const Run& plain = plain_of(*c);
      Row r = summarise(*c, plain);
      fmt::print(
          "{:>12} {:>8} {:>9.2f} {:>9.2f} {:>7.2f}x {:>7.3f} {:>6.3f} {:>8.2f} {:>6.3f} {:>6.3f} "
          "{:>8.2f}x {:>6.0f}% {:>6}\n",
          mode_label(r.mode), r.label(), plain.tok_per_s(), r.spec_tps, r.speedup, r.acceptance,
          r.alpha, r.tokens_per_round, r.c, r.v, r.predicted,
          r.predicted > 0 ? 100 * r.speedup / r.predicted : 0,
          checked(r.mode)
              ? (r.mismatches ? fmt::format("{} diff", r.mismatches) : std::string("yes"))
              : std::string("n/a"));
      rows.push_back(r);
      row_configs.push_back(c.get());
    }
    auto row_json = [&](const Row& r) {
      nlohmann::json j;
      j["k"] = r.k == "auto" ? nlohmann::json("auto") : nlohmann::json(std::stoi(r.k));
      j["tree_extra"] = r.tree;
      j["sampling_mode"] = mode_label(r.mode);
      j["spec_tok_per_s"] = r.spec_tps;
      j["speedup"] = r.speedup;
      j["acceptance_rate"] = r.acceptance;
      j["alpha"] = r.alpha;
      j["tokens_per_round"] = r.tokens_per_round;
      j["mean_k"] = r.mean_k;
      j["draft_rounds_fraction"] = r.draft_rounds;
      j["c"] = r.c;
      j["v"] = r.v;
      j["predicted_speedup"] = r.predicted;
      j["efficiency"] = r.predicted > 0 ? r.speedup / r.predicted : 0;
      if (checked(r.mode)) j["outputs_identical"] = r.mismatches == 0;
      return j;
    };
    auto constraint_json = [&](const Config& c) {
      return nlohmann::json{{"ms_per_token", c.run.constraint_ms_per_token()},
                            {"share_of_plain_step", c.run.constraint_share_of(plain_of(c))}};
    };
    // Best fixed K (or auto when it is the only one), chains or trees, of the
    // first mode; the other modes' rows are in per_k.
    const Row* best = nullptr;
    for (const auto& r : rows)
      if (r.mode == modes.front() && r.k != "auto" && (!best || r.speedup > best->speedup))
        best = &r;
    if (!best) best = &rows.front();
    nlohmann::json out = row_json(*best);
    out["plain_tok_per_s"] = plain_of(*row_configs.front()).tok_per_s();
    out["prompts"] = o.prompts;
    out["draft"] = o.spec.draft;
    out["temperature"] = o.sampling.temperature;
    out["per_k"] = nlohmann::json::array();
    out["plain"] = nlohmann::json::object();
    for (const auto& c : configs)
      if (c->k.empty()) out["plain"][mode_label(c->mode)] = c->run.tok_per_s();
    for (size_t i = 0; i < rows.size(); ++i) {
      nlohmann::json row = row_json(rows[i]);
      if (n_constrained > 0) row["constraint"] = constraint_json(*row_configs[i]);
      out["per_k"].push_back(row);
      if (rows[i].mode != modes.front()) continue;
      if (rows[i].k == "auto" && rows[i].tree == 0) out["auto"] = row;
      if (rows[i].k == "auto" && rows[i].tree > 0) out["auto_tree"] = row;
    }
    if (n_constrained > 0) out["plain_constraint"] = constraint_json(*configs.front());
    if (!o.chart.empty()) write_chart(o, rows, trees, modes);
    fmt::print("\n{}\n", out.dump());
  });
}

}  // namespace tandem::cli
