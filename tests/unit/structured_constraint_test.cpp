// GrammarConstraint, the TokenConstraint the engine applies, on SmolLM2 through
// the engine: JSON under schemas, greedy output token for token the same with
// and without speculation (the n-gram drafter, and the model as its own draft
// model), and every output, greedy or sampled, a whole document that parses
// and validates against its schema.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "model/model.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"
#include "structured/grammar_constraint.h"
#include "structured/json_schema.h"
#include "support/json_schema_validator.h"
#include "support/paths.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::structured {
namespace {

using ojson = nlohmann::ordered_json;

struct Task {
  const char* prompt;
  const char* schema;  // bounded strings: a small model can repeat itself forever in a free one
};

const Task kTasks[] = {
    {"Describe a fictional person as JSON with a name, an age and up to three hobbies.",
     R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
         "age": {"type": "integer", "minimum": 0, "maximum": 120},
         "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3}},
         "required": ["name", "age", "hobbies"]})"},
    {"Give the colour of a banana and of a cherry as JSON.",
     R"({"type": "array", "items": {"type": "object", "properties": {"fruit": {"enum": ["banana", "cherry"]},
         "colour": {"type": "string", "maxLength": 20}}, "required": ["fruit", "colour"]}, "minItems": 2, "maxItems": 2})"},
    {"Describe a cat as JSON.",
     R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
         "colour": {"enum": ["black", "white", "ginger", "grey"]}, "lives": {"type": "integer", "maximum": 9}},
         "required": ["name", "colour", "lives"], "additionalProperties": false})"},
};

struct Generated {
  std::vector<int> tokens;
  std::string text, finish_reason;
  int drafted = 0;
};

class StructuredConstraintEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = Model::load(test::cached_model("smollm2-135m-instruct-q4_1.gguf")).release();
    vocab_ = new std::shared_ptr<const TokenVocabulary>(
        TokenVocabulary::from_tokenizer(model_->require_tokenizer(), model_->config().vocab_size));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete model_;
  }

  static std::shared_ptr<const Grammar> grammar(const Task& t) {
    return compile_json_schema(ojson::parse(t.schema));
  }

  // Every task through one engine; `drafter` "" (none), "ngram" or "self".
  std::vector<Generated> generate(const std::string& drafter, float temperature) {
    ThreadPool pool(0);
    EngineOptions eo;
    eo.n_ctx = 512;
    eo.spec = SpecOptions{4, false};
    eo.spec.opt_out = false;  // verify drafts even where they would not pay
    std::unique_ptr<Drafter> d;
    if (drafter == "ngram") d = std::make_unique<NgramDrafter>();
    if (drafter == "self")
      d = std::make_unique<ModelDrafter>(*model_, *model_, pool, engine_cache_config(eo));
    Engine engine(*model_, pool, eo, std::move(d));
    const Tokenizer& tok = model_->require_tokenizer();
    const auto family = detect_chat_template(model_->chat_template());
    std::vector<Generated> out;
    uint64_t seed = 7;
    for (const Task& t : kTasks) {
      Request r;
      r.prompt = tok.encode(
          render_chat(family, model_->chat_template(), {{"user", t.prompt}}, true), false, true);
      r.params.max_tokens = 200;
      r.params.sampling.temperature = temperature;
      r.params.sampling.seed = seed++;
      r.params.constraint = GrammarConstraint::start(grammar(t), *vocab_);
      const int id = engine.submit(std::move(r));
      engine.run();
      const RequestResult res = *engine.take_result(id);
      out.push_back(
          {res.tokens, res.text, finish_reason_name(res.finish_reason), res.stats.drafted});
    }
    return out;
  }

  static void expect_valid(const std::vector<Generated>& gen, const char* label) {
    for (size_t i = 0; i < gen.size(); ++i) {
      EXPECT_EQ(gen[i].finish_reason, "stop") << label << " task " << i << ": " << gen[i].text;
      nlohmann::json doc;
      ASSERT_NO_THROW(doc = nlohmann::json::parse(gen[i].text)) << label << ": " << gen[i].text;
      EXPECT_EQ(test::schema_violation(doc, nlohmann::json::parse(kTasks[i].schema)), "")
          << label << ": " << gen[i].text;
    }
  }

  static Model* model_;
  static std::shared_ptr<const TokenVocabulary>* vocab_;
};

Model* StructuredConstraintEngine::model_ = nullptr;
std::shared_ptr<const TokenVocabulary>* StructuredConstraintEngine::vocab_ = nullptr;

TEST_F(StructuredConstraintEngine, GreedyIsTheSameWithAndWithoutSpeculation) {
  const auto plain = generate("", 0.0f);
  expect_valid(plain, "plain");
  for (const char* drafter : {"ngram", "self"}) {
    const auto spec = generate(drafter, 0.0f);
    expect_valid(spec, drafter);
    int drafted = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << drafter << " task " << i;
      drafted += spec[i].drafted;
    }
    EXPECT_GT(drafted, 0) << drafter << " never drafted: the comparison shows nothing";
  }
}

TEST_F(StructuredConstraintEngine, SampledOutputsAreValidDocuments) {
  for (const char* drafter : {"", "ngram", "self"}) expect_valid(generate(drafter, 0.9f), drafter);
}

TEST(StructuredConstraint, MasksLikeTheMatcherAndForksIndependently) {
  std::vector<std::optional<std::string>> bytes(260);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  auto vocab = std::make_shared<TokenVocabulary>(bytes, std::vector<int>{256});
  auto c = GrammarConstraint::start(any_json_object_grammar(), vocab);
  std::vector<float> logits(260, 0.0f);
  EXPECT_TRUE(c->mask(logits.data(), 260));
  for (int id = 0; id < 260; ++id) EXPECT_EQ(logits[id] == 0.0f, id == '{') << id;
  auto f = c->fork();
  EXPECT_TRUE(f->allows('{'));
  f->advance('{');
  EXPECT_FALSE(f->allows('{'));
  EXPECT_TRUE(f->allows('}'));
  EXPECT_TRUE(c->allows('{'));  // the original is unchanged
  EXPECT_THROW(f->advance('x'), Error);
  f->advance('}');
  EXPECT_TRUE(f->allows(256));  // complete: end of generation
  f->advance(256);
  std::fill(logits.begin(), logits.end(), 0.0f);
  EXPECT_TRUE(f->mask(logits.data(), 260));  // after the end: only the end again
  for (int id = 0; id < 260; ++id) EXPECT_EQ(logits[id] == 0.0f, id == 256) << id;
}

}  // namespace
}  // namespace tandem::structured
