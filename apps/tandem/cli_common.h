// Pieces shared by the CLI subcommands: options every model command takes and
// turning the user's prompt into token ids.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>

#include "cache/kv_cache_factory.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/kernel_config.h"
#include "model/forward_pass.h"
#include "model/requantize.h"
#include "sampling/sampler.h"
#include "speculative/drafter.h"
#include "speculative/drafter_factory.h"
#include "speculative/speculative_runner.h"

namespace tandem {
class Model;
}

namespace tandem::cli {

struct PromptOptions {
  std::string prompt;
  std::string prompt_file;
  std::string ids;  // comma-separated token ids instead of text
  bool chat = false;
  std::string system;
  bool no_bos = false;
};

// A model loaded for the kernel configuration the environment asks for
// (TANDEM_KERNELS, TANDEM_PACK, TANDEM_PREFETCH, TANDEM_PREFETCH_PACKED; see
// kernels/kernel_config.h): the one place the CLI reads them, once per model a
// command loads (a draft model takes its target's configuration instead).
// requant: as Model::load's.
std::unique_ptr<Model> load_model(const std::string& path,
                                  const std::optional<Requantization>& requant = std::nullopt);
// What `model` requantized at load into `quant` (--draft-quant's or --quant's
// value), as one line; empty when it requantized nothing.
std::string requantized_line(const Model& model, const std::string& quant);

void add_prompt_options(CLI::App* cmd, PromptOptions& p);
// Prompt text (from -p or -f), rendered with the chat template when --chat, as ids.
std::vector<int> prompt_ids(const Model& model, const PromptOptions& p);
std::vector<int> parse_ids(const std::string& csv);

// --device cpu|cuda, --no-cuda-graphs, --no-cuda-fusion and --cuda-gemv
// lanes|groups (generate, serve, bench).
struct DeviceCliOptions {
  std::string device = "cpu";
  bool no_graphs = false;
  bool no_fusion = false;
  std::string gemv = "lanes";
};
void add_device_options(CLI::App* cmd, DeviceCliOptions& d);
// The forward pass the options ask for (empty: the CPU). Throws tandem::Error
// naming the problem where CUDA cannot run: a build without the kernels, or no
// device. Commands call it before loading a model, so the error comes first.
// profile_kernels: a device pass times its kernels (`bench decode --profile`).
ForwardPassFactory forward_pass_factory(const DeviceCliOptions& d, bool profile_kernels = false);

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed,
// --sampling-mode.
void add_sampling_options(CLI::App* cmd, SamplingParams& s, std::optional<uint64_t>& seed);
// --sampling-mode reproducible|optimal.
void add_sampling_mode_option(CLI::App* cmd, SamplingMode& mode);
// A seed for requests that did not ask for one.
uint64_t random_seed();

}  // namespace tandem::cli

namespace tandem::cli {

// -d/--draft (a draft model path, "ngram" or "suffix") and -k (a number or "auto").
struct SpecCliOptions {
  std::string draft;
  std::string k = "5";
  int draft_vocab = -1;  // -1: automatic (see add_spec_options)
  // The draft model's matrices requantized at load (model/requantize.h):
  // "q4_0" (the default: docs/decisions.md, "A draft model's matrices in Q4_0")
  // or "none".
  std::string draft_quant = "q4_0";
  // With a draft model, lookups first (speculative/lookup_first_drafter.h) unless
  // --no-draft-lookup: a lookup costs no draft step and is taken only where it is
  // accepted as often as the model's drafts (docs/decisions.md, "Lookups first by
  // default"). --draft-lookup asks for it by name, and is an error without a model.
  bool lookup = false;
  bool no_lookup = false;
  int tree = 0;  // draft trees: verified positions beyond the main chain (0: chains)
  // Where the lookups come from: "ngram" (the request's own text)
  // or "suffix" (that and recent requests' text, speculative/suffix_drafter.h).
  std::string lookup_source = "ngram";
  size_t suffix_budget = kDefaultSuffixBudget;  // tokens the suffix index holds
  bool no_rate_guard = false;                   // drafting decided by the cost model alone
  bool draft_always = false;                    // fixed K drafted every round, no opting out
};
void add_spec_options(CLI::App* cmd, SpecCliOptions& s);
// --draft-quant's check: the values model/requantize.h's parse_requantization
// takes (it owns the list), its error otherwise.
CLI::Validator draft_quant_check();
// The draft model's own options: --draft-quant, --draft-lookup, --no-draft-lookup
// and --lookup (bench spec has its own -d and -k).
void add_draft_model_flags(CLI::App* cmd, SpecCliOptions& s);
// The lookups in front of the draft model that the options ask for: None
// without a draft model (-d ngram|suffix, or none) or with --no-draft-lookup.
DraftLookup draft_lookup(const SpecCliOptions& s);
// Draft length options from -k; throws tandem::Error for K < 1 or a bad value.
SpecOptions spec_options(const SpecCliOptions& s);

// The drafter the options ask for (null without -d), and the draft model it
// reads, which must outlive it.
struct SpecSetup {
  std::unique_ptr<Model> draft_model;
  std::unique_ptr<Drafter> drafter;
};
// cache: the draft model's KV cache (engine_cache_config of the engine's options);
// forward_pass: the draft model's device (the target's).
SpecSetup make_drafter(const SpecCliOptions& s, const Model& target, ThreadPool& pool,
                       const KVCacheConfig& cache, const ForwardPassFactory& forward_pass = {});

}  // namespace tandem::cli
