// `tandem generate`: one prompt in, a completion out (streamed, or as JSON),
// optionally with speculative decoding. `tandem logits` writes raw logits for
// reference comparisons.
#include <fmt/format.h>

#include <climits>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/prompt_logits.h"
#include "engine/request_check.h"
#include "model/model.h"

namespace tandem::cli {

namespace {

DType kv_dtype(const std::string& s) { return s == "f32" ? DType::F32 : DType::F16; }

nlohmann::json result_json(const RequestResult& r, const ThreadPool& pool, uint64_t seed,
                           const char* sampling_mode) {
  const auto& st = r.stats;
  nlohmann::json j;
  j["text"] = r.text;
  j["tokens"] = r.tokens;
  j["n_prompt"] = st.n_prompt;
  j["n_generated"] = r.tokens.size();
  j["finish_reason"] = finish_reason_name(r.finish_reason);
  j["prefill_ms"] = st.prefill_ms;
  j["decode_ms"] = st.decode_ms;
  j["decode_tok_per_s"] = st.decode_tok_per_s();
  j["prefill_tok_per_s"] = st.prefill_ms > 0 ? st.n_prompt * 1000.0 / st.prefill_ms : 0.0;
  j["threads"] = pool.size();
  j["seed"] = seed;
  j["sampling_mode"] = sampling_mode;
  j["rounds"] = st.rounds;
  j["tokens_per_round"] = st.tokens_per_round();
  j["drafted"] = st.drafted;
  j["accepted"] = st.accepted;
  j["acceptance_rate"] = st.acceptance_rate();
  j["draft_ms"] = st.draft_ms;
  j["verify_ms"] = st.verify_ms;
  j["other_ms"] = st.decode_ms - st.draft_ms - st.verify_ms;
  return j;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate a completion for a prompt");
  struct Opts {
    std::string model;
    PromptOptions prompt;
    SpecCliOptions spec;
    DeviceCliOptions device;
    int n = 128;
    int threads = 0;
    int ctx = 0;
    bool json = false;
    bool ignore_eos = false;
    std::vector<std::string> stop;
    std::string kv_type = "f16";
    SamplingParams sampling;
    std::optional<uint64_t> seed;
  };
  auto opts = std::make_shared<Opts>();
  Opts& o = *opts;
  cmd->add_option("-m,--model", o.model, "GGUF file or Hugging Face directory")->required();
  add_prompt_options(cmd, o.prompt);
  add_spec_options(cmd, o.spec);
  add_device_options(cmd, o.device);
  cmd->add_option("-n,--max-tokens", o.n, "Tokens to generate at most")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-t,--threads", o.threads, "Threads (default: physical cores)");
  cmd->add_option("-c,--ctx", o.ctx, "Context to allocate (default: prompt + max tokens)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--stop", o.stop, "Stop string (repeatable)");
  cmd->add_option("--kv-type", o.kv_type, "KV cache type: f16 or f32")
      ->check(CLI::IsMember({"f16", "f32"}));
  add_sampling_options(cmd, o.sampling, o.seed);
  cmd->add_flag("--ignore-eos", o.ignore_eos, "Do not stop at end-of-generation tokens");
  cmd->add_flag("--json", o.json, "Print one JSON object with the result and timings");
  cmd->callback([opts] {
    const Opts& o = *opts;
    const ForwardPassFactory forward_pass = forward_pass_factory(o.device);
    auto model = load_model(o.model);
    auto ids = prompt_ids(*model, o.prompt);
    ThreadPool pool(o.threads);
    Request req;
    req.prompt = ids;
    req.params.max_tokens = o.n;
    req.params.stop_strings = o.stop;
    req.params.ignore_eos = o.ignore_eos;
    req.params.sampling = o.sampling;
    req.params.sampling.seed = o.seed ? *o.seed : random_seed();
    if (!o.json)
      req.on_text = [](const std::string& s) {
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fflush(stdout);
      };
    EngineOptions eo;
    // Room for the prompt and the tokens asked for (the engine caps it at the
    // model's context; the check below then names what does not fit).
    eo.n_ctx = std::max(o.ctx, static_cast<int>(std::min<int64_t>(
                                   int64_t{INT_MAX}, static_cast<int64_t>(ids.size()) + o.n)));
    eo.kv.type = kv_dtype(o.kv_type);
    eo.spec = spec_options(o.spec);
    eo.forward_pass = forward_pass;
    SpecSetup spec = make_drafter(o.spec, *model, pool, engine_cache_config(eo), forward_pass);
    Engine engine(*model, pool, eo, std::move(spec.drafter));
    check_request(req, engine.limits());
    const uint64_t seed = req.params.sampling.seed;
    int id = engine.submit(std::move(req));
    engine.run();
    RequestResult r = *engine.take_result(id);
    if (o.json) {
      nlohmann::json j = result_json(
          r, pool, seed, o.sampling.greedy() ? "greedy" : sampling_mode_name(o.sampling.mode));
      j["draft"] = o.spec.draft.empty() ? "none" : o.spec.draft;
      j["k"] = o.spec.draft.empty() ? nlohmann::json(0) : nlohmann::json(o.spec.k);
      fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      fmt::print("\n");
    }
  });
}

void add_logits_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "logits", "Write the logits of every prompt position as raw float32 (n x vocab)");
  struct Opts {
    std::string model, ids, out, kv_type = "f16";
    int threads = 0;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("-m,--model", opts->model, "GGUF file or Hugging Face directory")->required();
  cmd->add_option("--ids", opts->ids, "Comma-separated token ids")->required();
  cmd->add_option("-o,--output", opts->out, "Output file")->required();
  cmd->add_option("-t,--threads", opts->threads, "Threads (default: physical cores)");
  cmd->add_option("--kv-type", opts->kv_type, "KV cache type: f16 or f32")
      ->check(CLI::IsMember({"f16", "f32"}));
  cmd->callback([opts] {
    const Opts& o = *opts;
    auto m = load_model(o.model);
    PromptOptions p;
    p.ids = o.ids;
    auto tokens = prompt_ids(*m, p);
    ThreadPool pool(o.threads);
    auto logits = prompt_logits(*m, pool, tokens, kv_dtype(o.kv_type));
    std::FILE* f = std::fopen(o.out.c_str(), "wb");
    if (!f) fail("{}: cannot open for writing", o.out);
    size_t wrote = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
    std::fclose(f);
    check(wrote == logits.size(), "{}: write failed", o.out);
  });
}

}  // namespace tandem::cli
