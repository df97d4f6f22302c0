// The cost of constrained decoding's token masks on a real vocabulary (by
// default Qwen2.5's 151,936 ids, from the 1.5B model's GGUF): a JSON document
// as the model's tokenizer splits it is replayed token by token, a mask
// computed before each token, for
//   - Cold: a new matcher per document, so every grammar state's trie walk is
//     computed afresh (a schema's first request),
//   - Warm: matchers forked from one that has seen the document before (the
//     per-state caches filled; later requests with the same schema).
// Counters (the thread's CPU time): ms_per_mask (mean over the document's
// tokens), max_ms_per_mask (the slowest single mask), tokens (masks per document). Compile measures
// compiling the schema.
//
//   build/bench/tandem_bench_structured [--benchmark_filter=Warm]
//   TANDEM_BENCH_MODEL=path.gguf picks another model's vocabulary.
#include <benchmark/benchmark.h>

#include <time.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "io/gguf_reader.h"
#include "model/config.h"
#include "structured/grammar_matcher.h"
#include "structured/json_schema.h"
#include "tokenizer/tokenizer.h"

using namespace tandem;
using namespace tandem::structured;

namespace {

std::string model_path() {
  if (const char* p = std::getenv("TANDEM_BENCH_MODEL")) return p;
  const char* cache = std::getenv("TANDEM_CACHE");
  const std::string dir =
      cache ? cache
            : std::string(std::getenv("HOME") ? std::getenv("HOME") : ".") + "/.cache/tandem";
  return dir + "/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
}

struct Vocab {
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const TokenVocabulary> vocab;
};

const Vocab& vocab() {
  static const Vocab v = [] {
    GGUFFile f(model_path());
    Vocab out;
    out.tok = Tokenizer::from_gguf(f);
    out.vocab = TokenVocabulary::from_tokenizer(*out.tok, config_from_gguf(f).vocab_size);
    return out;
  }();
  return v;
}

struct Case {
  const char* name;
  const char* schema;  // nullptr: {"type": "json_object"}
  const char* document;
};

const Case kCases[] = {
    {"json_object", nullptr,
     R"({
  "name": "tandem",
  "version": "0.4.1",
  "description": "A C++20 inference engine with lossless speculative decoding.",
  "authors": [{"name": "Ada Lovelace", "email": "ada@example.org"}, {"name": "Alan Turing"}],
  "settings": {"threads": 2, "kv_type": "f16", "draft_k": "auto", "max_batch": 8, "temperature": 0.7},
  "benchmarks": [24.6, 27.1, 53.9, 1.61e0],
  "enabled": true,
  "notes": null
})"},
    {"schema", R"({"type": "object", "properties": {
        "id": {"type": "string", "format": "uuid"},
        "customer": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"},
          "tier": {"enum": ["free", "pro", "enterprise"]}}, "required": ["name", "tier"]},
        "items": {"type": "array", "items": {"type": "object", "properties": {
          "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d{4}$"}, "quantity": {"type": "integer", "minimum": 1, "maximum": 999},
          "price": {"type": "number"}, "note": {"type": "string"}}, "required": ["sku", "quantity", "price"]}, "minItems": 1},
        "paid": {"type": "boolean"}, "comment": {"type": ["string", "null"]}},
        "required": ["id", "customer", "items", "paid"]})",
     R"({
  "id": "3f2b8c1e-9d4a-4e7b-8c2d-1a5e6f7b8c9d",
  "customer": {
    "name": "Grace Hopper",
    "email": "grace@navy.mil",
    "tier": "enterprise"
  },
  "items": [
    {"sku": "ABC-1234", "quantity": 3, "price": 19.99, "note": "gift wrap, please"},
    {"sku": "XYZ-0042", "quantity": 12, "price": 4.5},
    {"sku": "QRS-7777", "quantity": 1, "price": 249.0, "note": "the blue one, not the red one"}
  ],
  "paid": true,
  "comment": "Deliver to the loading dock before noon on Friday; call ahead if the gate is closed."
})"},
    // A length-bounded string: every character position is a state of its own,
    // so a cold matcher walks the trie afresh at each token.
    {"string_max_length", R"({"type": "object", "properties": {
        "summary": {"type": "string", "minLength": 10, "maxLength": 256}}, "required": ["summary"]})",
     R"({"summary": "Speculative decoding lets a small draft model propose several tokens that the large target model then checks in a single forward pass; rejection sampling keeps the output distribution exactly that of the target."})"},
    // The same string under a bound above kMaxInlineLength: lengths counted
    // with calls of rules of 32 characters (string_length.h).
    {"string_max_length_4096", R"({"type": "object", "properties": {
        "summary": {"type": "string", "minLength": 10, "maxLength": 4096}}, "required": ["summary"]})",
     R"({"summary": "Speculative decoding lets a small draft model propose several tokens that the large target model then checks in a single forward pass; rejection sampling keeps the output distribution exactly that of the target."})"},
};

std::shared_ptr<const Grammar> grammar_of(const Case& c) {
  return c.schema ? compile_json_schema(nlohmann::ordered_json::parse(c.schema))
                  : any_json_object_grammar();
}

// This thread's CPU time in ms: other processes on a shared machine do not count.
double thread_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// Masks along the document: returns the slowest one in ms, adds the total.
double replay(GrammarMatcher& m, const std::vector<int>& ids, TokenMask& mask, double& total_ms) {
  double worst = 0;
  for (int id : ids) {
    const double t0 = thread_ms();
    m.fill_allowed(mask);
    const double ms = thread_ms() - t0;
    worst = std::max(worst, ms);
    total_ms += ms;
    if (!mask.test(id) || !m.accept(id)) throw std::runtime_error("the document is not allowed");
  }
  return worst;
}

void run(benchmark::State& state, const Case& c, bool warm) {
  const Vocab& v = vocab();
  const auto g = grammar_of(c);
  const std::vector<int> ids = v.tok->encode(c.document, false, false);
  GrammarMatcher seen(g, v.vocab);
  TokenMask mask;
  double total = 0, worst = 0;
  if (warm) replay(seen, ids, mask, total);  // fills the caches
  total = 0;
  int64_t masks = 0;
  for (auto _ : state) {
    GrammarMatcher m = warm ? seen.restart() : GrammarMatcher(g, v.vocab);
    worst = std::max(worst, replay(m, ids, mask, total));
    masks += static_cast<int64_t>(ids.size());
  }
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["ms_per_mask"] = total / static_cast<double>(masks);
  state.counters["max_ms_per_mask"] = worst;
  state.counters["vocab"] = v.vocab->n_ids();
}

void Cold(benchmark::State& state, const Case& c) { run(state, c, false); }
void Warm(benchmark::State& state, const Case& c) { run(state, c, true); }

void Compile(benchmark::State& state, const Case& c) {
  for (auto _ : state) benchmark::DoNotOptimize(grammar_of(c));
}

void VocabularyTrie(benchmark::State& state) {
  const Vocab& v = vocab();
  for (auto _ : state)
    benchmark::DoNotOptimize(TokenVocabulary::from_tokenizer(*v.tok, v.vocab->n_ids()));
  state.counters["trie_nodes"] = v.vocab->n_nodes();
}

const int registered = [] {
  for (const Case& c : kCases) {
    benchmark::RegisterBenchmark((std::string("Cold/") + c.name).c_str(), Cold, c)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("Warm/") + c.name).c_str(), Warm, c)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("Compile/") + c.name).c_str(), Compile, c)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("VocabularyTrie", VocabularyTrie)->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
