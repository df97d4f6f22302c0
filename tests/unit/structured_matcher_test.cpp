// The token matcher (src/structured/grammar_matcher.h) on real vocabularies:
// SmolLM2's and Qwen2.5's (byte-level BPE, from the GGUF models), Llama 3's
// (tokenizer.json) and llama-spm's (SentencePiece with byte fallback).
//  - Masks equal a brute-force reference that tries every token, at states
//    reached by random walks.
//  - Random walks that sample only allowed tokens always end in a document
//    that nlohmann::json parses and that validates against the schema (an
//    independent validator, tests/support/json_schema_validator.h).
//  - Special tokens are never allowed; end-of-generation only when complete;
//    rollback and fork give back the same masks.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "io/gguf_reader.h"
#include "structured/grammar_matcher.h"
#include "structured/json_schema.h"
#include "support/json_schema_validator.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace tandem::structured {
namespace {

using ojson = nlohmann::ordered_json;

struct LoadedVocab {
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const TokenVocabulary> vocab;
};

const LoadedVocab& load(const std::string& name) {
  static std::map<std::string, LoadedVocab> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  LoadedVocab v;
  int n_ids = 0;
  if (name == "llama3") {
    v.tok =
        Tokenizer::from_hf_json(test::shared_testdata_dir() + "/tokenizers/llama3/tokenizer.json");
  } else {
    std::string path;
    if (name == "smollm2") path = test::cached_model("smollm2-135m-instruct-q4_1.gguf");
    if (name == "qwen") {
      path = test::cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
      n_ids = 151936;  // the model's output rows: more than the tokenizer's ids
    }
    if (name == "llama-spm")
      path = test::shared_testdata_dir() + "/tokenizers/llamacpp-vocab/ggml-vocab-llama-spm.gguf";
    GGUFFile f(path);
    v.tok = Tokenizer::from_gguf(f);
  }
  v.vocab = TokenVocabulary::from_tokenizer(*v.tok, n_ids);
  return cache.emplace(name, std::move(v)).first->second;
}

// The schemas the walks use, with features of every kind.
const char* const kSchemas[] = {
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "email": {"type": "string", "pattern": "^[a-z]{1,8}@[a-z]{1,8}\\.(com|org)$"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c d"]}, "maxItems": 3},
        "score": {"type": "number"}, "ok": {"type": "boolean"}, "none": {"type": "null"}},
        "required": ["name", "age", "tags"]})",
    R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer", "minimum": -5, "maximum": 5},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"]}},
        "$ref": "#/$defs/node"})",
    R"({"anyOf": [{"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"]},
                  {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "integer"}, "h": {"type": "integer"}}, "required": ["kind", "w", "h"]},
                  {"type": ["string", "null"], "minLength": 1, "maxLength": 4}]})",
    R"({"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
        "when": {"type": "string", "format": "date"}}, "required": ["id"]}, "minItems": 1, "maxItems": 2})",
    R"({"type": "object", "additionalProperties": {"type": "integer"}})",
    // The keywords of issue #29: number bounds, multipleOf, formats, uniqueItems,
    // patternProperties, allOf, counts, dependencies, long strings, $ref forms.
    R"({"type": "object", "properties": {"price": {"type": "number", "exclusiveMinimum": 0, "maximum": 99.5},
        "qty": {"type": "integer", "multipleOf": 5, "maximum": 100},
        "contact": {"type": "string", "format": "email"}, "site": {"type": "string", "format": "uri"},
        "ip": {"type": "string", "format": "ipv6"}, "host": {"type": "string", "format": "hostname"},
        "colors": {"type": "array", "items": {"enum": ["r", "g", "b"]}, "uniqueItems": true},
        "note": {"type": "string", "maxLength": 300}, "x-n": {"$ref": "#/definitions/a%20b"}},
        "patternProperties": {"^x-": {"type": "integer"}}, "required": ["price", "x-flag"],
        "minProperties": 3, "dependencies": {"qty": ["contact"]},
        "definitions": {"a b": {"type": "integer", "minimum": -3}},
        "allOf": [{"properties": {"price": {"minimum": 0.5}}}]})",
    R"({"type": "object", "patternProperties": {"^[a-z]{1,6}$": {"type": "string", "format": "date-time"}},
        "additionalProperties": false, "minProperties": 1, "maxProperties": 3})",
};

std::string text_of(const TokenVocabulary& v, const std::vector<int>& ids) {
  std::string out;
  for (int id : ids)
    if (const std::string* b = v.bytes(id)) out += *b;
  return out;
}

// Ids that write `text` exactly, longest token first: the tokenizer's own
// encoding would add SentencePiece's leading space, which generated
// continuations do not have.
std::vector<int> ids_for(const TokenVocabulary& v, const std::string& text) {
  static std::map<const TokenVocabulary*, std::map<std::string, int>> by_bytes;
  auto& index = by_bytes[&v];
  if (index.empty())
    for (int id = 0; id < v.n_ids(); ++id)
      if (const std::string* b = v.bytes(id)) index.emplace(*b, id);
  std::vector<int> ids;
  for (size_t pos = 0; pos < text.size();) {
    size_t len = std::min<size_t>(text.size() - pos, v.max_depth());
    for (; len > 0; --len)
      if (auto it = index.find(text.substr(pos, len)); it != index.end()) {
        ids.push_back(it->second);
        break;
      }
    if (len == 0) ADD_FAILURE() << "no token for the byte at " << pos << " of " << text;
    pos += std::max<size_t>(len, 1);
  }
  return ids;
}

// The reference: try every id by itself.
TokenMask brute_force_mask(const GrammarMatcher& m) {
  TokenMask mask(m.vocab().n_ids());
  for (int id = 0; id < m.vocab().n_ids(); ++id)
    if (m.is_allowed(id)) mask.set(id);
  return mask;
}

// One random walk: uniform over the allowed ids; after `budget` steps it
// prefers ids of single closing bytes so that the document ends.
std::vector<int> random_walk(GrammarMatcher& m, std::mt19937& rng, int budget,
                             const std::function<void(const TokenMask&)>& at_each_mask) {
  const TokenVocabulary& v = m.vocab();
  TokenMask mask;
  std::vector<int> ids;
  for (int step = 0; step < 4 * budget && !m.is_terminated(); ++step) {
    m.fill_allowed(mask);
    at_each_mask(mask);
    std::vector<int> allowed = mask.allowed_ids();
    if (allowed.empty()) break;
    if (step >= budget) {
      std::vector<int> closing, single;
      for (int id : allowed) {
        if (v.is_eog(id)) {
          closing = {id};
          break;
        }
        const std::string* b = v.bytes(id);
        if (b && b->size() == 1) {
          ((*b)[0] == '"' || (*b)[0] == ']' || (*b)[0] == '}' ? closing : single).push_back(id);
        }
      }
      if (!closing.empty())
        allowed = closing;
      else if (!single.empty())
        allowed = single;
    }
    const int id = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    EXPECT_TRUE(m.accept(id)) << "an allowed id was refused: " << id;
    ids.push_back(id);
  }
  return ids;
}

class StructuredMatcherVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(StructuredMatcherVocab, MasksEqualBruteForce) {
  const LoadedVocab& lv = load(GetParam());
  std::mt19937 rng(1234);
  int compared = 0;
  for (const char* schema : kSchemas) {
    auto g = compile_json_schema(ojson::parse(schema));
    GrammarMatcher m(g, lv.vocab);
    int step = 0;
    random_walk(m, rng, 40, [&](const TokenMask& mask) {
      // Every 5th state, and a walk is at most a few hundred steps.
      if (step++ % 5 != 0) return;
      // m has not advanced yet: compare at the current state.
      const TokenMask ref = brute_force_mask(m);
      ASSERT_EQ(mask.count(), ref.count()) << schema << " at step " << step;
      ASSERT_TRUE(mask == ref) << schema << " at step " << step;
      ++compared;
    });
  }
  EXPECT_GT(compared, 20);
}

TEST_P(StructuredMatcherVocab, RandomWalksGiveValidDocuments) {
  const LoadedVocab& lv = load(GetParam());
  std::mt19937 rng(99);
  for (const char* schema : kSchemas) {
    const nlohmann::json plain_schema = nlohmann::json::parse(schema);
    auto g = compile_json_schema(ojson::parse(schema));
    for (int walk = 0; walk < 6; ++walk) {
      GrammarMatcher m(g, lv.vocab);
      const std::vector<int> ids = random_walk(m, rng, 60, [](const TokenMask&) {});
      const std::string text = text_of(*lv.vocab, ids);
      ASSERT_TRUE(m.is_complete()) << "walk did not finish: " << text;
      nlohmann::json doc;
      ASSERT_NO_THROW(doc = nlohmann::json::parse(text)) << text;
      EXPECT_EQ(test::schema_violation(doc, plain_schema), "") << text;
      // The end-of-generation token closes it where the vocabulary has one.
      if (!lv.vocab->eog_ids().empty() && !m.is_terminated()) {
        TokenMask mask;
        m.fill_allowed(mask);
        EXPECT_TRUE(mask.test(lv.vocab->eog_ids()[0]));
      }
    }
  }
}

TEST_P(StructuredMatcherVocab, SpecialTokensAndEndOfGeneration) {
  const LoadedVocab& lv = load(GetParam());
  GrammarMatcher m(any_json_object_grammar(), lv.vocab);
  TokenMask mask;
  auto no_special = [&] {
    for (int id = 0; id < lv.tok->vocab_size(); ++id) {
      if (lv.tok->is_special(id)) {
        ASSERT_FALSE(mask.test(id)) << lv.tok->piece(id);
      }
    }
    for (int id = lv.tok->vocab_size(); id < lv.vocab->n_ids(); ++id) ASSERT_FALSE(mask.test(id));
  };
  m.fill_allowed(mask);
  no_special();
  for (int eog : lv.vocab->eog_ids()) EXPECT_FALSE(mask.test(eog));
  for (int id : ids_for(*lv.vocab, "{\"a\": \"x")) ASSERT_TRUE(m.accept(id));
  m.fill_allowed(mask);  // inside a string: almost everything
  no_special();
  EXPECT_GT(mask.count(), lv.vocab->n_ids() / 2);
  for (int id : ids_for(*lv.vocab, "y\"}")) ASSERT_TRUE(m.accept(id));
  EXPECT_TRUE(m.is_complete());
  m.fill_allowed(mask);
  for (int eog : lv.vocab->eog_ids()) EXPECT_TRUE(mask.test(eog));
  EXPECT_EQ(mask.count(), static_cast<int>(lv.vocab->eog_ids().size()));
  if (!lv.vocab->eog_ids().empty()) {
    EXPECT_TRUE(m.accept(lv.vocab->eog_ids()[0]));
    EXPECT_TRUE(m.is_terminated());
    m.fill_allowed(mask);  // ended: only end-of-generation tokens again
    EXPECT_EQ(mask.count(), static_cast<int>(lv.vocab->eog_ids().size()));
    EXPECT_FALSE(m.accept(ids_for(*lv.vocab, "{")[0]));
    EXPECT_TRUE(m.accept(lv.vocab->eog_ids()[0]));
  }
}

TEST_P(StructuredMatcherVocab, RollbackAndForkGiveTheSameMasks) {
  const LoadedVocab& lv = load(GetParam());
  auto g = compile_json_schema(ojson::parse(kSchemas[0]));
  GrammarMatcher m(g, lv.vocab);
  const std::vector<int> ids =
      ids_for(*lv.vocab, R"({"name": "Bo", "age": 41, "tags": ["a", "c d"], "ok": true})");
  std::vector<TokenMask> masks;
  for (int id : ids) {
    masks.emplace_back();
    m.fill_allowed(masks.back());
    ASSERT_TRUE(m.accept(id)) << lv.tok->piece(id);
  }
  EXPECT_TRUE(m.is_complete());
  const int n = static_cast<int>(ids.size());
  GrammarMatcher f = m.fork();
  EXPECT_EQ(f.n_steps(), 0);
  // Undo 5 tokens, check the mask there, redo them on a fork.
  m.rollback(5);
  TokenMask mask;
  m.fill_allowed(mask);
  EXPECT_TRUE(mask == masks[n - 5]);
  GrammarMatcher g2 = m.fork();
  for (int k = n - 5; k < n; ++k) {
    g2.fill_allowed(mask);
    EXPECT_TRUE(mask == masks[k]);
    ASSERT_TRUE(g2.accept(ids[k]));
  }
  EXPECT_TRUE(g2.is_complete());
  EXPECT_FALSE(m.is_complete());
  // A refused token changes nothing.
  const int before = m.n_steps();
  const std::vector<int> bad = ids_for(*lv.vocab, "]");
  EXPECT_FALSE(m.accept(bad[0]));
  EXPECT_EQ(m.n_steps(), before);
  m.rollback(m.n_steps());
  m.fill_allowed(mask);
  EXPECT_TRUE(mask == masks[0]);
  GrammarMatcher again = g2.restart();
  EXPECT_EQ(again.n_steps(), 0);
  again.fill_allowed(mask);
  EXPECT_TRUE(mask == masks[0]);
}

// Whole documents token by token: valid ones end complete, invalid ones are
// refused at some token or left incomplete.
TEST_P(StructuredMatcherVocab, DocumentsTokenByToken) {
  const LoadedVocab& lv = load(GetParam());
  struct Case {
    const char* schema;
    std::vector<const char*> valid, invalid;
  };
  const Case cases[] = {
      {kSchemas[0],
       {R"({"name": "Zoë 😀", "age": 130, "tags": ["c d", "a"], "none": null})",
        "{\n  \"name\": \"\\u00e9\\n\",\n  \"age\": 0,\n  \"tags\": []\n}",
        R"({"name":"x","age":7,"email":"ab@cd.org","tags":["b"],"score":-1.5e-3,"ok":false})"},
       {R"({"name": "x", "age": 131, "tags": []})", R"({"name": "x", "tags": [], "age": 1})",
        R"({"name": "x", "age": 1, "tags": ["e"]})",
        R"({"name": "x", "age": 1, "tags": [], "y": 1})",
        R"({"name": "x", "age": 1, "email": "AB@cd.org", "tags": []})", R"({"name": "x", "age": 1)",
        R"({"name": "0123456789abc", "age": 1, "tags": []})"}},
      {kSchemas[1],
       {R"({"v": -5, "kids": [{"v": 5}, {"v": 0, "kids": []}]})"},
       {R"({"v": 6})", R"({"v": 1, "kids": [{"v": 1}, {"v": 2}, {"v": 3}]})"}},
      {kSchemas[4], {R"({"a": 1, "b": -2})", "{}"}, {R"({"a": "1"})", R"({"a": 1.5})"}},
  };
  for (const Case& c : cases) {
    auto g = compile_json_schema(ojson::parse(c.schema));
    for (const char* doc : c.valid) {
      GrammarMatcher m(g, lv.vocab);
      for (int id : ids_for(*lv.vocab, doc)) {
        ASSERT_TRUE(m.accept(id)) << doc << ": refused " << *lv.vocab->bytes(id);
      }
      EXPECT_TRUE(m.is_complete()) << doc;
    }
    for (const char* doc : c.invalid) {
      GrammarMatcher m(g, lv.vocab);
      bool refused = false;
      for (int id : ids_for(*lv.vocab, doc)) {
        if (!m.accept(id)) {
          refused = true;
          break;
        }
      }
      EXPECT_TRUE(refused || !m.is_complete()) << doc;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, StructuredMatcherVocab,
                         ::testing::Values("smollm2", "qwen", "llama3", "llama-spm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

TEST(StructuredMatcher, ApplyMaskSetsMinusInfinity) {
  TokenMask mask(130);
  for (int id : {0, 63, 64, 129}) mask.set(id);
  std::vector<float> logits(140, 1.5f);
  apply_token_mask(mask, logits.data(), static_cast<int>(logits.size()));
  for (int id = 0; id < 140; ++id) {
    const bool allowed = id == 0 || id == 63 || id == 64 || id == 129;
    EXPECT_EQ(logits[id], allowed ? 1.5f : -INFINITY) << id;
  }
}

}  // namespace
}  // namespace tandem::structured
