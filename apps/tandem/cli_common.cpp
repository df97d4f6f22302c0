#include "cli_common.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/error.h"
#include "cuda_model/device_choice.h"
#include "model/model.h"
#include "speculative/drafter_factory.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

std::unique_ptr<Model> load_model(const std::string& path,
                                  const std::optional<Requantization>& requant) {
  return Model::load(path, kernels::kernel_config_from_env(), requant);
}

std::string requantized_line(const Model& model, const std::string& quant) {
  const auto& rq = model.requantized();
  if (rq.matrices == 0) return {};
  return fmt::format("{} matrices to {}, {:.1f} MiB -> {:.1f} MiB, {:.2f} s", rq.matrices, quant,
                     rq.file_bytes / 1048576.0, rq.bytes / 1048576.0, rq.seconds);
}

void add_prompt_options(CLI::App* cmd, PromptOptions& p) {
  cmd->add_option("-p,--prompt", p.prompt, "Prompt text");
  cmd->add_option("-f,--file", p.prompt_file, "Read the prompt from a file");
  cmd->add_option("--ids", p.ids, "Prompt as comma-separated token ids (no tokenizer involved)");
  cmd->add_flag("--chat", p.chat,
                "Send the prompt as one user message in the model's chat template");
  cmd->add_option("--system", p.system, "System message (with --chat)");
  cmd->add_flag("--no-bos", p.no_bos, "Do not add the BOS token");
}

void add_sampling_options(CLI::App* cmd, SamplingParams& s, std::optional<uint64_t>& seed) {
  // Ranges are checked with the request (engine/request_check.h), which names the field.
  cmd->add_option("--temp", s.temperature, "Sampling temperature; 0 is greedy (default 0)");
  cmd->add_option("--top-k", s.top_k, "Keep the K most likely tokens; 0 is off");
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling mass in (0, 1]; 1 is off");
  cmd->add_option("--min-p", s.min_p, "Drop tokens below MIN_P x p(best); 0 is off");
  cmd->add_option("--repeat-penalty", s.repetition_penalty, "Repetition penalty; 1 is off");
  cmd->add_option("--repeat-last-n", s.penalty_last_n,
                  "Recent tokens the repetition penalty considers; -1 is all (default 64)");
  cmd->add_option("--seed", seed, "Random seed (default: a random one, printed with --json)");
  add_sampling_mode_option(cmd, s.mode);
}

void add_sampling_mode_option(CLI::App* cmd, SamplingMode& mode) {
  const std::map<std::string, SamplingMode> modes{{"reproducible", SamplingMode::Reproducible},
                                                  {"optimal", SamplingMode::Optimal}};
  cmd->add_option("--sampling-mode", mode,
                  "How sampled tokens are drawn: reproducible (a seed gives the same tokens "
                  "with any drafter) or optimal (the most accepted drafts); default reproducible")
      ->transform(CLI::CheckedTransformer(modes, CLI::ignore_case));
}

uint64_t random_seed() {
  // Below 2^63, so that the seed a response reports can be sent back as the
  // OpenAI API's (signed) seed.
  std::random_device rd;
  return ((uint64_t{rd()} << 32) | rd()) >> 1;
}

std::vector<int> parse_ids(const std::string& csv) {
  std::vector<int> ids;
  std::stringstream ss(csv);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    try {
      size_t used = 0;
      ids.push_back(std::stoi(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      fail("--ids: '{}' is not a token id", item);
    }
  }
  check(!ids.empty(), "--ids: no token ids given");
  return ids;
}

std::vector<int> prompt_ids(const Model& model, const PromptOptions& p) {
  if (!p.ids.empty()) {
    auto ids = parse_ids(p.ids);
    for (int id : ids)
      check(id >= 0 && id < model.config().vocab_size,
            "--ids: token id {} outside the vocabulary [0, {})", id, model.config().vocab_size);
    return ids;
  }
  std::string text = p.prompt;
  if (!p.prompt_file.empty()) {
    std::ifstream in(p.prompt_file, std::ios::binary);
    check(in.good(), "{}: cannot read prompt file", p.prompt_file);
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  check(!text.empty(), "empty prompt: give -p TEXT, -f FILE or --ids");
  const Tokenizer& tok = model.require_tokenizer();
  if (p.chat) {
    std::vector<ChatMessage> msgs;
    if (!p.system.empty()) msgs.push_back({"system", p.system});
    msgs.push_back({"user", text});
    auto family = detect_chat_template(model.chat_template());
    std::string rendered = render_chat(family, model.chat_template(), msgs, true);
    // The rendered template carries its own BOS text where the family wants one.
    return tok.encode(rendered, false, true);
  }
  return tok.encode(text, tok.add_bos() && !p.no_bos, false);
}

CLI::Validator draft_quant_check() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          parse_requantization(value);
          return {};
        } catch (const Error& e) {
          return e.what();
        }
      },
      "q4_0|none");
}

void add_draft_model_flags(CLI::App* cmd, SpecCliOptions& s) {
  cmd->add_option("--draft-quant", s.draft_quant,
                  "Draft model: requantize its matrices stored in more than 4.5 bits a weight "
                  "to q4_0 at load (the default: a cheaper draft step; the output is the "
                  "target's either way), or none (as the file has them)")
      ->check(draft_quant_check())
      ->capture_default_str();
  auto* on = cmd->add_flag("--draft-lookup", s.lookup,
                           "Draft model: propose an n-gram match from the text so far instead "
                           "where lookups are accepted at least as often as the model's drafts "
                           "(the default)");
  auto* off = cmd->add_flag("--no-draft-lookup", s.no_lookup,
                            "Draft model: every draft from the model, no lookups first")
                  ->excludes(on);
  cmd->add_option("--lookup", s.lookup_source,
                  "With a draft model: where its lookups come from, 'ngram' (the request's "
                  "text) or 'suffix' (also recent requests' text)")
      ->check(CLI::IsMember({"ngram", "suffix"}))
      ->capture_default_str()
      ->excludes(off);
}

void add_spec_options(CLI::App* cmd, SpecCliOptions& s) {
  cmd->add_option("-d,--draft", s.draft,
                  "Speculative decoding: a draft model (GGUF or HF directory), 'ngram' (lookup "
                  "in the request's text) or 'suffix' (lookup in the request's text and in "
                  "recent requests' text of the same API key)");
  cmd->add_option("-k,--draft-tokens", s.k, "Tokens drafted per round, or 'auto' (default 5)");
  cmd->add_option("--draft-vocab", s.draft_vocab,
                  "Draft model: propose only the first N token ids (plus special tokens); "
                  "0 = all; default 32768 for vocabularies over 65536, else all");
  add_draft_model_flags(cmd, s);
  cmd->add_option("--suffix-budget", s.suffix_budget,
                  "Tokens of recent requests' text the suffix index keeps (about 16 bytes "
                  "each); the oldest requests' text is evicted first")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--tree", s.tree,
                  "Draft trees: verify up to N more positions beside each draft's main chain "
                  "(a draft model's runner-up tokens where it is unsure, other n-gram "
                  "matches' continuations); 0 = chains (default)");
  cmd->add_flag("--no-rate-guard", s.no_rate_guard,
                "Let the cost model alone decide where to draft, without the check of the "
                "tokens/s drafted rounds deliver against plain ones (for tests and "
                "measurements that must see drafting where it does not pay)");
  cmd->add_flag("--draft-always", s.draft_always,
                "With a fixed -k: draft K tokens for every request in every round, whatever "
                "the cost model and the rate guard would decide (to measure a K, or to "
                "exercise the drafted path)");
}

void add_device_options(CLI::App* cmd, DeviceCliOptions& d) {
  cmd->add_option("--device", d.device,
                  "Where the forward pass runs: cpu (default) or cuda (the CUDA backend, "
                  "docs/cuda.md)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_flag("--no-cuda-graphs", d.no_graphs,
                "With --device cuda: run every pass eagerly instead of replaying CUDA graphs");
  cmd->add_flag("--no-cuda-fusion", d.no_fusion,
                "With --device cuda: launch each matmul, bias, RoPE, KV store and SwiGLU on its "
                "own (the same results; for comparing)");
  cmd->add_option("--cuda-gemv", d.gemv,
                  "With --device cuda: which lanes read which weights in the matmuls: lanes "
                  "(default; 16-byte coalesced loads) or groups (a warp per column, 4-byte "
                  "loads). Results differ by rounding")
      ->check(CLI::IsMember({"groups", "lanes"}))
      ->capture_default_str();
}

ForwardPassFactory forward_pass_factory(const DeviceCliOptions& d, bool profile_kernels) {
  cuda_model::CudaOptions o;
  o.graphs = !d.no_graphs;
  o.fused = !d.no_fusion;
  o.gemv = d.gemv == "groups" ? cuda::GemvMapping::Groups : cuda::GemvMapping::Lanes;
  o.profile = profile_kernels;
  return cuda_model::forward_pass_factory(cuda_model::parse_device(d.device), o);
}

SpecOptions spec_options(const SpecCliOptions& s) {
  SpecOptions o;
  check(s.tree >= 0 && s.tree <= kMaxDraft, "--tree: must be in [0, {}], got {}", kMaxDraft,
        s.tree);
  o.tree_extra = s.tree;
  o.rate_guard = !s.no_rate_guard && !s.draft_always;
  o.opt_out = !s.draft_always;
  if (s.k == "auto") {
    check(!s.draft_always, "--draft-always: needs a fixed draft length (-k N), not -k auto");
    o.adaptive = true;
    o.k = 12;
    return o;
  }
  try {
    size_t used = 0;
    o.k = std::stoi(s.k, &used);
    if (used != s.k.size()) throw std::invalid_argument(s.k);
  } catch (const std::exception&) {
    fail("-k: '{}' is not a number or 'auto'", s.k);
  }
  check(o.k >= 1, "-k: the draft length must be >= 1, got {}", o.k);
  check(o.k <= 32, "-k: the draft length must be <= 32, got {}", o.k);
  return o;
}

namespace {
// -d ngram|suffix: a drafter that is all lookups, with no model behind it.
bool lookup_drafter(const SpecCliOptions& s) { return s.draft == "ngram" || s.draft == "suffix"; }
}  // namespace

DraftLookup draft_lookup(const SpecCliOptions& s) {
  if (s.draft.empty() || lookup_drafter(s) || s.no_lookup) return DraftLookup::None;
  return s.lookup_source == "suffix" ? DraftLookup::Suffix : DraftLookup::Ngram;
}

SpecSetup make_drafter(const SpecCliOptions& s, const Model& target, ThreadPool& pool,
                       const KVCacheConfig& cache, const ForwardPassFactory& forward_pass) {
  SpecSetup out;
  if (s.draft.empty()) return out;
  if (lookup_drafter(s)) {
    check(!s.lookup && !s.no_lookup,
          "--{}draft-lookup goes with a draft model (-d MODEL), not -d {}",
          s.no_lookup ? "no-" : "", s.draft);
    out.drafter = s.draft == "ngram" ? make_ngram_drafter(s.tree)
                                     : make_suffix_drafter(s.tree, s.suffix_budget);
    return out;
  }
  out.draft_model =
      Model::load(s.draft, target.kernel_config(), parse_requantization(s.draft_quant));
  out.drafter = make_model_drafter(*out.draft_model, target, pool, cache, s.draft_vocab, s.tree,
                                   draft_lookup(s), s.suffix_budget, forward_pass);
  return out;
}

}  // namespace tandem::cli
