// Greedy parity on real models: speculative output equals plain greedy output
// token for token for 128 tokens, on five diverse prompts, for SmolLM2-135M with
// the n-gram drafter and for the Qwen2.5-Coder 0.5B (draft) / 1.5B (target) pair.
#include <gtest/gtest.h>

#include <utility>

#include "engine/engine.h"
#include "model/model.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"
#include "support/paths.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

using namespace tandem;

namespace {

// Chat, code completion and copy-heavy prompts.
const std::vector<std::pair<std::string, bool>> kPrompts = {
    {"What are three good reasons to learn to cook at home?", true},
    {"def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", false},
    {"Repeat this sentence twice: the quick brown fox jumps over the lazy dog.", true},
    {"// C: reverse a string in place\nvoid reverse(char *s) {\n", false},
    {"Explain what a hash table is in two sentences.", true},
};

std::vector<int> encode(const Model& m, const std::string& text, bool chat) {
  const Tokenizer& tok = m.require_tokenizer();
  if (!chat) return tok.encode(text, tok.add_bos(), false);
  auto family = detect_chat_template(m.chat_template());
  return tok.encode(render_chat(family, m.chat_template(), {{"user", text}}, true), false, true);
}

std::vector<std::vector<int>> generate_all(const Model& target, std::unique_ptr<Drafter> drafter,
                                           SpecOptions so, ThreadPool& pool, int* drafted) {
  EngineOptions eo;
  eo.n_ctx = 512;
  eo.spec = so;
  eo.spec.opt_out = false;  // verify drafts even where they would not pay
  Engine engine(target, pool, eo, std::move(drafter));
  std::vector<std::vector<int>> out;
  *drafted = 0;
  for (const auto& [text, chat] : kPrompts) {
    Request r;
    r.prompt = encode(target, text, chat);
    r.params.max_tokens = 128;
    r.params.ignore_eos = true;  // always compare the full 128 tokens
    int id = engine.submit(std::move(r));
    engine.run();
    auto res = *engine.take_result(id);
    *drafted += res.stats.drafted;
    out.push_back(res.tokens);
  }
  return out;
}

void expect_same(const std::vector<std::vector<int>>& a, const std::vector<std::vector<int>>& b,
                 const char* label) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), 128u);
    EXPECT_EQ(a[i], b[i]) << label << ", prompt " << i;
  }
}

}  // namespace

TEST(SpecRealModels, SmolLM2NgramGreedyParity) {
  auto m = Model::load(test::cached_model("smollm2-135m-instruct-q4_1.gguf"));
  ThreadPool pool(0);
  int drafted = 0;
  auto plain = generate_all(*m, nullptr, {}, pool, &drafted);
  for (SpecOptions so : {SpecOptions{5, false}, SpecOptions{12, true}}) {
    auto spec = generate_all(*m, std::make_unique<NgramDrafter>(), so, pool, &drafted);
    expect_same(plain, spec, so.adaptive ? "ngram auto" : "ngram k=5");
    EXPECT_GT(drafted, 0);
  }
}

TEST(SpecRealModels, QwenCoderPairGreedyParity) {
  auto target = Model::load(test::cached_model("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"));
  auto draft = Model::load(test::cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
  ThreadPool pool(0);
  int drafted = 0;
  auto plain = generate_all(*target, nullptr, {}, pool, &drafted);
  KVCacheConfig kv;
  kv.n_ctx = 512;
  auto spec = generate_all(*target, std::make_unique<ModelDrafter>(*draft, *target, pool, kv),
                           {5, false}, pool, &drafted);
  expect_same(plain, spec, "Qwen2.5-Coder 0.5B -> 1.5B, k=5");
  EXPECT_GT(drafted, 0);
  // Adaptive K (drafts stopped early by the draft's confidence) with the draft
  // restricted to the first 32768 ids, as the CLI runs it: the draft as the file
  // has it, then with its matrices requantized to Q4_0 at load, as the CLI loads
  // it by default.
  auto q4 = Model::load(test::cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"), {},
                        Requantization{});
  EXPECT_GT(q4->requantized().matrices, 0);
  for (auto [d, what] : {std::pair{draft.get(), "Qwen2.5-Coder 0.5B -> 1.5B, auto"},
                         std::pair{q4.get(), "Qwen2.5-Coder 0.5B in Q4_0 -> 1.5B, auto"}}) {
    drafted = 0;
    auto adaptive =
        generate_all(*target, std::make_unique<ModelDrafter>(*d, *target, pool, kv, 32768),
                     {12, true}, pool, &drafted);
    expect_same(plain, adaptive, what);
    EXPECT_GT(drafted, 0) << what;
  }
}
