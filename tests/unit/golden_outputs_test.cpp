// Golden outputs: the token streams of a matrix of configurations (plain, n-gram,
// draft model, trees, lookups first, seeded sampling in both modes, structured
// output) on the bundled models, pinned by hash in tests/golden/outputs.tsv. A
// change that alters any of them fails here; if the change is meant to, the same
// commit updates the file and says why:
//
//   TANDEM_GOLDEN_UPDATE=1 build/tests/golden_outputs_test
//
// rewrites the entries of this machine's SIMD target (the kernels of different
// instruction sets round differently; their entries are kept apart). The
// configurations that must agree by construction (every drafter against plain
// decoding, greedy or seeded in reproducible mode) are also compared with each
// other, so the file cannot pin a broken guarantee. The hashes are of
// uninstrumented builds; a sanitizer build checks the guarantees only
// (tests/CMakeLists.txt says why).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/engine.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "speculative/drafter_factory.h"
#include "structured/grammar_constraint.h"
#include "structured/json_schema.h"
#include "structured/token_vocabulary.h"
#include "support/paths.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

using namespace tandem;

namespace {

// FNV-1a, 64 bits, over the ids' little-endian bytes.
uint64_t fnv1a(const std::vector<int>& tokens) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int t : tokens)
    for (int b = 0; b < 4; ++b) {
      h ^= static_cast<uint32_t>(t) >> (8 * b) & 0xff;
      h *= 0x100000001b3ull;
    }
  return h;
}

struct Prompt {
  std::string text;
  bool chat;
};

const std::vector<Prompt> kPrompts = {
    {"Give three tips for writing clear emails.", true},
    {"def quicksort(items):\n    \"\"\"Sort a list of numbers.\"\"\"\n", false},
    {"Repeat exactly: red fish, blue fish, red fish, blue fish, red fish,", true},
};

std::vector<int> encode(const Model& m, const Prompt& p) {
  const Tokenizer& tok = m.require_tokenizer();
  if (!p.chat) return tok.encode(p.text, tok.add_bos(), false);
  const auto family = detect_chat_template(m.chat_template());
  return tok.encode(render_chat(family, m.chat_template(), {{"user", p.text}}, true), false, true);
}

// One configuration of the matrix.
struct Config {
  enum class Draft { None, Ngram, Model, ModelLookup };
  std::string name;
  Draft draft = Draft::None;
  SpecOptions spec;
  float temperature = 0;
  SamplingMode mode = SamplingMode::Reproducible;
  bool structured = false;
  std::string same_as;  // the configuration whose tokens this one must reproduce ("" none)

  Config& with(Draft d, SpecOptions so) {
    draft = d;
    spec = so;
    return *this;
  }
  Config& sampled(float t, SamplingMode m = SamplingMode::Reproducible) {
    temperature = t;
    mode = m;
    return *this;
  }
  Config& constrained() {
    structured = true;
    return *this;
  }
  Config& same_tokens_as(std::string other) {
    same_as = std::move(other);
    return *this;
  }
};

Config config(std::string name) {
  Config c;
  c.name = std::move(name);
  return c;
}

SpecOptions fixed(int k, int tree = 0) { return {k, false, true, tree}; }
SpecOptions adaptive(int tree = 0) { return {12, true, true, tree}; }

std::vector<Config> configs(bool have_draft_model) {
  using D = Config::Draft;
  const auto optimal = SamplingMode::Optimal;
  std::vector<Config> c = {
      config("plain"),
      config("ngram-k4").with(D::Ngram, fixed(4)).same_tokens_as("plain"),
      config("ngram-auto-tree4").with(D::Ngram, adaptive(4)).same_tokens_as("plain"),
      config("sampled-t0.7").sampled(0.7f),
      config("sampled-t0.7-ngram-k4")
          .with(D::Ngram, fixed(4))
          .sampled(0.7f)
          .same_tokens_as("sampled-t0.7"),
      config("sampled-t0.7-ngram-auto")
          .with(D::Ngram, adaptive())
          .sampled(0.7f)
          .same_tokens_as("sampled-t0.7"),
      config("sampled-t1.0-optimal").sampled(1.0f, optimal),
      config("structured").constrained(),
      config("structured-ngram-k4")
          .with(D::Ngram, fixed(4))
          .constrained()
          .same_tokens_as("structured"),
  };
  if (have_draft_model) {
    c.push_back(config("pair-k4").with(D::Model, fixed(4)).same_tokens_as("plain"));
    c.push_back(config("pair-auto-tree4").with(D::Model, adaptive(4)).same_tokens_as("plain"));
    c.push_back(
        config("pair-lookup-auto").with(D::ModelLookup, adaptive()).same_tokens_as("plain"));
    c.push_back(config("sampled-t0.7-pair-k4")
                    .with(D::Model, fixed(4))
                    .sampled(0.7f)
                    .same_tokens_as("sampled-t0.7"));
    c.push_back(config("sampled-t0.7-pair-auto-tree4")
                    .with(D::Model, adaptive(4))
                    .sampled(0.7f)
                    .same_tokens_as("sampled-t0.7"));
    c.push_back(config("structured-pair-k4")
                    .with(D::Model, fixed(4))
                    .constrained()
                    .same_tokens_as("structured"));
  }
  return c;
}

struct ModelSetup {
  std::string name, target, draft;  // draft "": none
  int max_tokens;
};

const char* kSchema = R"({"type": "object",
  "properties": {"name": {"type": "string", "maxLength": 24}, "age": {"type": "integer"}},
  "required": ["name", "age"]})";

// key "model\tconfig\tprompt" -> "tokens\thash"
using Entries = std::map<std::string, std::string>;

Entries run_matrix(const ModelSetup& s) {
  auto target = Model::load(test::cached_model(s.target));
  std::unique_ptr<Model> draft;
  // The draft loaded as the CLI loads it by default (--draft-quant q4_0).
  if (!s.draft.empty()) draft = Model::load(test::cached_model(s.draft), {}, Requantization{});
  ThreadPool pool(0);
  auto vocab = structured::TokenVocabulary::from_tokenizer(target->require_tokenizer(),
                                                           target->config().vocab_size);
  auto grammar = structured::compile_json_schema(nlohmann::ordered_json::parse(kSchema));
  Entries out;
  std::map<std::string, std::vector<std::vector<int>>> tokens_of;
  for (const Config& c : configs(draft != nullptr)) {
    EngineOptions eo;
    eo.n_ctx = 512;
    eo.spec = c.spec;
    std::unique_ptr<Drafter> d;
    const KVCacheConfig kv = engine_cache_config(eo);
    if (c.draft == Config::Draft::Ngram) d = make_ngram_drafter(c.spec.tree_extra);
    if (c.draft == Config::Draft::Model || c.draft == Config::Draft::ModelLookup)
      d = make_model_drafter(
          *draft, *target, pool, kv, -1, c.spec.tree_extra,
          c.draft == Config::Draft::ModelLookup ? DraftLookup::Ngram : DraftLookup::None);
    Engine engine(*target, pool, eo, std::move(d));
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      Request r;
      r.prompt = encode(*target, kPrompts[i]);
      r.params.max_tokens = s.max_tokens;
      r.params.sampling.temperature = c.temperature;
      r.params.sampling.seed = 1234 + i;
      r.params.sampling.mode = c.mode;
      if (c.structured) r.params.constraint = structured::GrammarConstraint::start(grammar, vocab);
      const int id = engine.submit(std::move(r));
      engine.run();
      const RequestResult res = *engine.take_result(id);
      tokens_of[c.name].push_back(res.tokens);
      out[fmt::format("{}\t{}\t{}", s.name, c.name, i)] =
          fmt::format("{}\t{:016x}", res.tokens.size(), fnv1a(res.tokens));
    }
    if (!c.same_as.empty()) {
      EXPECT_EQ(tokens_of[c.name], tokens_of[c.same_as])
          << s.name << ": " << c.name << " must give the tokens of " << c.same_as;
    }
  }
  return out;
}

std::string golden_path() { return test::source_dir() + "/tests/golden/outputs.tsv"; }

// The file's entries of `target` (and, in *others, every other line).
Entries read_golden(const std::string& target, std::vector<std::string>* others) {
  Entries e;
  std::ifstream f(golden_path());
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    if (line.substr(0, tab) != target) {
      if (others) others->push_back(line);
      continue;
    }
    // target \t model \t config \t prompt \t tokens \t hash
    std::vector<std::string> f6;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, '\t')) f6.push_back(field);
    if (f6.size() != 6) {
      ADD_FAILURE() << golden_path() << ": malformed line: " << line;
      continue;
    }
    e[f6[1] + "\t" + f6[2] + "\t" + f6[3]] = f6[4] + "\t" + f6[5];
  }
  return e;
}

void write_golden(const std::string& target, const Entries& mine,
                  const std::vector<std::string>& others) {
  std::ofstream f(golden_path());
  f << "# tandem's golden outputs: generated tokens and their FNV-1a 64 hash per SIMD target,\n"
       "# model, configuration and prompt (tests/unit/golden_outputs_test.cpp). A change that\n"
       "# alters an output updates this file in the same commit and says why:\n"
       "#   TANDEM_GOLDEN_UPDATE=1 build/tests/golden_outputs_test\n"
       "# target\tmodel\tconfig\tprompt\ttokens\thash\n";
  std::vector<std::string> lines = others;
  for (const auto& [key, value] : mine) lines.push_back(target + "\t" + key + "\t" + value);
  std::sort(lines.begin(), lines.end());
  for (const auto& l : lines) f << l << "\n";
}

}  // namespace

TEST(GoldenOutputs, MatchTheCheckedInHashes) {
  const std::string target = kernels::simd_target_name();
  const std::vector<ModelSetup> setups = {
      {"smollm2-135m", "smollm2-135m-instruct-q4_1.gguf", "", 48},
      {"qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
       "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 32},
  };
#ifdef TANDEM_INSTRUMENTED_BUILD
  // A sanitizer build rounds differently (tests/CMakeLists.txt): its hashes
  // must never be written to the file, which pins uninstrumented builds.
  // Refused before the matrix's long run under the sanitizers.
  ASSERT_EQ(std::getenv("TANDEM_GOLDEN_UPDATE"), nullptr)
      << "TANDEM_GOLDEN_UPDATE in a sanitizer build: the golden file pins uninstrumented "
         "builds; update it from build/";
#endif
  Entries got;
  for (const auto& s : setups) {
    const Entries e = run_matrix(s);
    got.insert(e.begin(), e.end());
  }
#ifdef TANDEM_INSTRUMENTED_BUILD
  // The matrix above ran under the sanitizers and its guarantees held; its
  // hashes are not the ones the file pins.
  std::printf("sanitizer build: %zu outputs produced, hashes not compared\n", got.size());
  return;
#endif
  if (std::getenv("TANDEM_GOLDEN_UPDATE")) {
    std::vector<std::string> others;
    read_golden(target, &others);
    write_golden(target, got, others);
    std::printf("wrote %zu entries for %s to %s\n", got.size(), target.c_str(),
                golden_path().c_str());
    return;
  }
  const Entries want = read_golden(target, nullptr);
  ASSERT_FALSE(want.empty()) << golden_path() << " has no entries for SIMD target " << target
                             << ": run TANDEM_GOLDEN_UPDATE=1 build/tests/golden_outputs_test on a "
                                "machine with it (and commit the file)";
  for (const auto& [key, value] : got) {
    auto it = want.find(key);
    if (it == want.end()) {
      ADD_FAILURE() << "no golden entry for " << key << " (new configuration? update the file)";
      continue;
    }
    EXPECT_EQ(value, it->second) << key << ": the output changed (tokens\\thash)";
  }
  for (const auto& [key, value] : want)
    EXPECT_TRUE(got.count(key)) << "golden entry " << key << " is no longer produced";
}
