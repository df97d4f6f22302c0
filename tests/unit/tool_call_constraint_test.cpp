// The tool-call constraint (structured/tool_call_constraint.h) and the grammar
// of a call (structured/tool_call_grammar.h): parameters schemas with their own
// $refs, refusals named within the function's parameters; random walks over
// Qwen2.5's real vocabulary, in every tool_choice mode, that take only allowed
// tokens and always give calls that name an offered function with arguments
// that validate; masks that agree with allows(); and, through the engine on
// SmolLM2, greedy output token for token the same with and without speculation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "io/gguf_reader.h"
#include "model/model.h"
#include "server/tool_call_output.h"
#include "speculative/model_drafter.h"
#include "speculative/ngram_drafter.h"
#include "structured/json_schema.h"
#include "structured/tool_call_constraint.h"
#include "structured/tool_call_grammar.h"
#include "support/json_schema_validator.h"
#include "support/paths.h"
#include "support/test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tandem::structured {
namespace {

using ojson = nlohmann::ordered_json;

const ojson kWeatherParams = ojson::parse(R"({"type": "object", "properties": {
    "city": {"enum": ["Paris", "Rome", "Zürich"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "days"], "additionalProperties": false})");
const ojson kMoveParams = ojson::parse(R"({"type": "object", "properties": {
    "to": {"$ref": "#/$defs/point"}, "via": {"type": "array", "items": {"$ref": "#/$defs/point"},
    "maxItems": 2}}, "required": ["to", "via"], "additionalProperties": false,
    "$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0,
    "maximum": 9}, "y": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["x", "y"],
    "additionalProperties": false}}})");

std::vector<ToolFunction> functions() {
  return {{"get_weather", kWeatherParams}, {"move", kMoveParams}};
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  std::vector<std::optional<std::string>> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  GrammarMatcher m(g, std::make_shared<TokenVocabulary>(bytes, std::vector<int>{}));
  return m.accept_bytes(text) && m.is_complete();
}

TEST(ToolCallGrammar, CallsOfEveryFunctionWithTheirOwnRefs) {
  auto g = tool_call_grammar(functions(), "arguments", "\n", "\n");
  EXPECT_TRUE(accepts(g,
                      "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", "
                      "\"days\": 3}}\n"));
  EXPECT_TRUE(accepts(g,
                      "\n{\"name\": \"move\", \"arguments\": {\"to\": {\"x\": 1, \"y\": 2}, "
                      "\"via\": [{\"x\": 0, \"y\": 0}]}}\n"));
  // Another function's arguments, an unknown name, a missing member, no framing.
  EXPECT_FALSE(accepts(g,
                       "\n{\"name\": \"move\", \"arguments\": {\"city\": \"Rome\", "
                       "\"days\": 3}}\n"));
  EXPECT_FALSE(accepts(g, "\n{\"name\": \"fly\", \"arguments\": {}}\n"));
  EXPECT_FALSE(accepts(g, "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n"));
  EXPECT_FALSE(accepts(g,
                       "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", "
                       "\"days\": 3}}"));
  // One function (the Llama key): the same refs, no anyOf around them.
  auto one = tool_call_grammar({functions()[1]}, "parameters", "", "");
  EXPECT_TRUE(accepts(one,
                      "{\"name\": \"move\", \"parameters\": {\"to\": {\"x\": 1, \"y\": 2}, "
                      "\"via\": []}}"));
}

TEST(ToolCallGrammar, RefusalsNameTheFunctionAndPlace) {
  size_t bad = 99;
  auto params =
      ojson::parse(R"({"type": "object", "properties": {"s": {"not": {"type": "string"}}}})");
  std::vector<ToolFunction> fs = functions();
  fs.push_back({"weird", params});
  try {
    tool_call_grammar(fs, "arguments", "", "", &bad);
    FAIL() << "a schema with 'not' compiled";
  } catch (const SchemaError& e) {
    EXPECT_EQ(bad, 2u);
    EXPECT_EQ(e.path.rfind("/properties/s", 0), 0u) << e.path;
    EXPECT_NE(std::string(e.what()).find("#/properties/s"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("anyOf"), std::string::npos) << e.what();
  }
}

class ToolCallWalks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    GGUFFile f(test::cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
    tok_ = Tokenizer::from_gguf(f).release();
    vocab_ = new std::shared_ptr<const TokenVocabulary>(TokenVocabulary::from_tokenizer(*tok_));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete tok_;
  }

  static std::shared_ptr<const ToolCallTokens> tokens(bool markers) {
    if (!markers) return find_tool_call_tokens(**vocab_, -1, -1, {});
    return find_tool_call_tokens(**vocab_, *tok_->find_piece("<tool_call>"),
                                 *tok_->find_piece("</tool_call>"), {"```json\n"});
  }

  // A walk that takes random allowed tokens (favouring short ones, so that
  // documents end) and, in free text, the given opening after a few tokens.
  std::string walk(const TokenConstraint& start, int seed, const std::vector<int>& opening,
                   bool* ended) {
    std::mt19937 rng(seed);
    auto c = start.fork();
    const int n = (*vocab_)->n_ids();
    std::vector<float> logits(n);
    std::vector<int> ids;
    std::string text;
    *ended = false;
    size_t forced = 0;
    for (int step = 0; step < 400; ++step) {
      for (int i = 0; i < n; ++i) {
        const std::string* b = (*vocab_)->bytes(i);
        logits[i] = b ? -static_cast<float>(b->size()) : 0.0f;
      }
      EXPECT_TRUE(c->mask(logits.data(), n));
      std::vector<int> allowed;
      for (int i = 0; i < n; ++i)
        if (std::isfinite(logits[i])) allowed.push_back(i);
      if (step % 37 == 0) {  // the mask and allows() agree on every id
        for (int i = 0; i < n; i += 7) EXPECT_EQ(c->allows(i), std::isfinite(logits[i])) << i;
      }
      int token;
      if (step >= 3 && forced < opening.size() && c->allows(opening[forced])) {
        token = opening[forced++];
      } else {
        // Among the allowed, a short one most of the time.
        const size_t top = std::min<size_t>(allowed.size(), 40);
        std::partial_sort(allowed.begin(), allowed.begin() + top, allowed.end(),
                          [&](int a, int b) { return logits[a] > logits[b]; });
        const size_t pick = rng() % 4 == 0 ? rng() % allowed.size() : rng() % top;
        token = allowed[pick];
      }
      if ((*vocab_)->is_eog(token)) {
        *ended = true;
        break;
      }
      c->advance(token);
      ids.push_back(token);
    }
    for (int id : ids) text += tok_->token_bytes(id, true);
    return text;
  }

  void check_calls(const std::string& text, const ToolCallFormat& format, bool ended,
                   int* complete) {
    const server::ToolCallOutput out = server::read_tool_calls(format, text);
    for (const auto& call : out.calls) {
      if (!call.complete) {
        EXPECT_FALSE(ended) << "ended inside a call: " << text;
        continue;
      }
      ++*complete;
      const ojson* params = nullptr;
      static const std::vector<ToolFunction> fs = functions();
      for (const auto& f : fs)
        if (f.name == call.name) params = &f.parameters;
      ASSERT_NE(params, nullptr) << call.name;
      nlohmann::json args;
      ASSERT_NO_THROW(args = nlohmann::json::parse(call.arguments)) << call.arguments;
      const nlohmann::json schema = nlohmann::json::parse(params->dump());
      EXPECT_EQ(test::schema_violation(args, schema), "") << call.arguments;
    }
  }

  static Tokenizer* tok_;
  static std::shared_ptr<const TokenVocabulary>* vocab_;
};

Tokenizer* ToolCallWalks::tok_ = nullptr;
std::shared_ptr<const TokenVocabulary>* ToolCallWalks::vocab_ = nullptr;

TEST_F(ToolCallWalks, HermesCallsAlwaysValidate) {
  ToolCallFormat format;
  format.open = "<tool_call>";
  format.close = "</tool_call>";
  format.fence_open = {"```json\n"};
  format.fence_close = "\n```";
  ToolCallGrammars g;
  g.marked = tool_call_grammar(functions(), "arguments", "\n", "\n");
  g.bare = tool_call_grammar(functions(), "arguments", "", "");
  g.fenced = tool_call_grammar(functions(), "arguments", "", "\n```");
  const auto t = tokens(true);
  const std::vector<int> marker = {t->open};
  const std::vector<int> fence = tok_->encode("```json\n", false, false);
  const std::vector<int> brace = tok_->encode("{\"", false, false);
  int complete = 0, walks = 0;
  for (auto start : {ToolCallConstraint::Start::Call, ToolCallConstraint::Start::Free})
    for (bool parallel : {true, false})
      for (int seed = 0; seed < 6; ++seed) {
        auto c = ToolCallConstraint::start(g, *vocab_, t, start, parallel);
        bool ended = false;
        const std::vector<int>& opening = seed % 3 == 0 ? fence : seed % 3 == 1 ? marker : brace;
        const std::string text = walk(*c, seed, opening, &ended);
        check_calls(text, format, ended, &complete);
        ++walks;
        if (start == ToolCallConstraint::Start::Call) {  // opens with the marker at once
          EXPECT_EQ(text.rfind("<tool_call>", 0), 0u) << text;
        }
        if (!parallel) {
          EXPECT_LE(server::read_tool_calls(format, text).calls.size(), 1u) << text;
        }
      }
  // The walks must reach whole calls for the checks above to mean anything.
  EXPECT_GE(complete, walks / 2) << complete << " complete calls in " << walks << " walks";
}

TEST_F(ToolCallWalks, LlamaStyleCallsAlwaysValidate) {
  ToolCallFormat format;
  format.arguments_key = "parameters";
  ToolCallGrammars g;
  g.bare = tool_call_grammar(functions(), "parameters", "", "");
  const auto t = tokens(false);
  const std::vector<int> brace = tok_->encode("{\"", false, false);
  int complete = 0, walks = 0, free_text = 0;
  for (auto start : {ToolCallConstraint::Start::Call, ToolCallConstraint::Start::Free})
    for (int seed = 0; seed < 6; ++seed) {
      auto c = ToolCallConstraint::start(g, *vocab_, t, start, false);
      bool ended = false;
      // Free: the first token decides; a walk that starts with '{' is a call.
      const std::string text = walk(*c, seed, seed % 2 ? brace : std::vector<int>{}, &ended);
      check_calls(text, format, ended, &complete);
      free_text += !text.empty() && text[0] != '{';
      ++walks;
      if (start == ToolCallConstraint::Start::Call) {
        EXPECT_EQ(text[0], '{') << text;
      }
    }
  EXPECT_GE(complete, walks / 3);
  EXPECT_GT(free_text, 0) << "auto mode never answered in text";
}

TEST_F(ToolCallWalks, ForksKeepTheirOwnState) {
  ToolCallGrammars g;
  g.marked = tool_call_grammar(functions(), "arguments", "\n", "\n");
  const auto t = tokens(true);
  auto c = ToolCallConstraint::start(g, *vocab_, t, ToolCallConstraint::Start::Call, true);
  auto a = c->fork();
  a->advance(t->open);
  for (int id : tok_->encode("\n{\"name\": \"get_weather\"", false, false)) a->advance(id);
  auto b = a->fork();
  const int comma = tok_->encode(",", false, false)[0];
  b->advance(comma);
  EXPECT_TRUE(a->allows(comma));   // a has not moved with b
  EXPECT_FALSE(b->allows(comma));  // b is past it
  EXPECT_FALSE(c->allows(comma));  // the start allows only the marker
  EXPECT_TRUE(c->allows(t->open));
}

// Greedy output through the engine, with tools (Llama-style calls on SmolLM2's
// vocabulary), is token for token the same plain, with the n-gram drafter and
// with the model as its own draft model.
TEST(ToolCallEngine, GreedyIsTheSameWithAndWithoutSpeculation) {
  auto model = Model::load(test::cached_model("smollm2-135m-instruct-q4_1.gguf"));
  const Tokenizer& tok = model->require_tokenizer();
  auto vocab = TokenVocabulary::from_tokenizer(tok, model->config().vocab_size);
  const auto t = find_tool_call_tokens(*vocab, -1, -1, {});
  ToolCallGrammars g;
  g.bare = tool_call_grammar(functions(), "parameters", "", "");
  const auto family = detect_chat_template(model->chat_template());
  const char* prompts[] = {
      "Call get_weather for Paris for 3 days. Answer with JSON only, as {\"name\": ..., "
      "\"parameters\": ...}.",
      "Move to x 3, y 4 via one point. Answer with a JSON function call.",
      "What is the weather in Rome?"};
  auto run = [&](const std::string& drafter) {
    ThreadPool pool(0);
    EngineOptions eo;
    eo.n_ctx = 512;
    eo.spec = SpecOptions{4, false};
    eo.spec.opt_out = false;
    std::unique_ptr<Drafter> d;
    if (drafter == "ngram") d = std::make_unique<NgramDrafter>();
    if (drafter == "self")
      d = std::make_unique<ModelDrafter>(*model, *model, pool, engine_cache_config(eo));
    Engine engine(*model, pool, eo, std::move(d));
    std::vector<RequestResult> out;
    for (auto start : {ToolCallConstraint::Start::Call, ToolCallConstraint::Start::Free})
      for (const char* p : prompts) {
        Request r;
        r.prompt = tok.encode(render_chat(family, model->chat_template(), {{"user", p}}, true),
                              false, true);
        r.params.max_tokens = 120;
        r.params.sampling.temperature = 0.0f;
        r.params.constraint = ToolCallConstraint::start(g, vocab, t, start, false);
        const int id = engine.submit(std::move(r));
        engine.run();
        out.push_back(*engine.take_result(id));
      }
    return out;
  };
  const auto plain = run("");
  ToolCallFormat format;
  format.arguments_key = "parameters";
  int calls = 0;
  for (const auto& r : plain) {
    const auto read = server::read_tool_calls(format, r.text);
    for (const auto& c : read.calls) calls += c.complete;
  }
  EXPECT_GE(calls, 3) << "the constrained requests must produce calls";
  for (const char* drafter : {"ngram", "self"}) {
    const auto spec = run(drafter);
    int drafted = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << drafter << " request " << i;
      drafted += spec[i].stats.drafted;
    }
    EXPECT_GT(drafted, 0) << drafter << " never drafted";
  }
}

}  // namespace
}  // namespace tandem::structured
