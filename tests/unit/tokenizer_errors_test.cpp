// Bad tokenizer inputs: each must be a tandem::Error that names the file and
// the field at fault, never a crash or a tokenizer that quietly misbehaves.
// The GGUF files are written by hand here (header, metadata, no tensors).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "support/paths.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

using namespace tandem;
using nlohmann::json;

namespace {

// A GGUF v3 file with metadata only.
class MiniGGUF {
 public:
  MiniGGUF& str(const std::string& key, const std::string& v) {
    head(key, 8);
    put_str(v);
    return *this;
  }
  MiniGGUF& u32(const std::string& key, uint32_t v) {
    head(key, 4);
    put(v);
    return *this;
  }
  MiniGGUF& boolean(const std::string& key, bool v) {
    head(key, 7);
    put(static_cast<uint8_t>(v));
    return *this;
  }
  MiniGGUF& strings(const std::string& key, const std::vector<std::string>& v) {
    array_head(key, 8, v.size());
    for (const auto& s : v) put_str(s);
    return *this;
  }
  MiniGGUF& i32s(const std::string& key, const std::vector<int32_t>& v) {
    array_head(key, 5, v.size());
    for (int32_t x : v) put(x);
    return *this;
  }
  MiniGGUF& f32s(const std::string& key, const std::vector<float>& v) {
    array_head(key, 6, v.size());
    for (float x : v) put(x);
    return *this;
  }
  // Writes the file; keys listed in `skip` are left out.
  std::string write(const std::string& name, const std::vector<std::string>& skip = {}) const {
    std::string body;
    uint64_t n = 0;
    for (const auto& [key, bytes] : kv_) {
      if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
      body += bytes;
      ++n;
    }
    std::string path = test::temp_dir("tok-gguf") + "/" + name + ".gguf";
    std::ofstream out(path, std::ios::binary);
    uint32_t version = 3;
    uint64_t n_tensors = 0;
    out.write("GGUF", 4);
    out.write(reinterpret_cast<const char*>(&version), 4);
    out.write(reinterpret_cast<const char*>(&n_tensors), 8);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << body;
    return path;
  }

 private:
  template <typename T>
  void put(T v) {
    cur_->append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_str(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    cur_->append(s);
  }
  void head(const std::string& key, uint32_t type) {
    for (auto& [k, b] : kv_) {  // setting a key again replaces it
      if (k == key) {
        b.clear();
        cur_ = &b;
        put_str(key);
        put(type);
        return;
      }
    }
    kv_.emplace_back(key, "");
    cur_ = &kv_.back().second;
    put_str(key);
    put(type);
  }
  void array_head(const std::string& key, uint32_t elem_type, size_t n) {
    head(key, 9);
    put(elem_type);
    put(static_cast<uint64_t>(n));
  }
  std::vector<std::pair<std::string, std::string>> kv_;
  std::string* cur_ = nullptr;
};

// The 256 byte symbols, then "ab" (from the merge "a b") and a control token.
MiniGGUF valid_bpe() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_level::byte_text(static_cast<uint8_t>(b)));
  tokens.push_back("ab");
  tokens.push_back("<|end|>");
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  MiniGGUF g;
  g.str("general.architecture", "llama")
      .str("tokenizer.ggml.model", "gpt2")
      .str("tokenizer.ggml.pre", "gpt-2")
      .strings("tokenizer.ggml.tokens", tokens)
      .i32s("tokenizer.ggml.token_type", types)
      .strings("tokenizer.ggml.merges", {"a b"})
      .u32("tokenizer.ggml.eos_token_id", 257);
  return g;
}

// <unk>, <s>, </s>, the 256 byte tokens, then ▁, a, b, ▁a with scores.
MiniGGUF valid_spm() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
  }
  for (const char* t : {"\xE2\x96\x81", "a", "b",
                        "\xE2\x96\x81"
                        "a"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  scores.back() = -1.0f;
  MiniGGUF g;
  g.str("tokenizer.ggml.model", "llama")
      .strings("tokenizer.ggml.tokens", tokens)
      .i32s("tokenizer.ggml.token_type", types)
      .f32s("tokenizer.ggml.scores", scores)
      .u32("tokenizer.ggml.bos_token_id", 1)
      .u32("tokenizer.ggml.eos_token_id", 2);
  return g;
}

// Expects from_gguf(path) to fail with a message containing the path and each of `parts`.
void expect_gguf_error(const std::string& path, const std::vector<std::string>& parts) {
  try {
    GGUFFile f(path);
    Tokenizer::from_gguf(f);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

}  // namespace

TEST(TokenizerGGUFErrors, ValidFilesLoad) {
  // The baselines that the other tests break one field of. Byte b is token b.
  GGUFFile bf(valid_bpe().write("bpe"));
  auto bpe = Tokenizer::from_gguf(bf);
  EXPECT_EQ(bpe->encode("abc", false, false), (std::vector<int>{256, 'c'}));
  EXPECT_EQ(bpe->eos_id(), 257);
  EXPECT_TRUE(bpe->is_eog(257));
  EXPECT_EQ(bpe->encode("ab<|end|>", false, true), (std::vector<int>{256, 257}));
  EXPECT_EQ(bpe->decode({256, 'c', 257}, false), "abc");

  // SentencePiece: byte b is token 3 + b; 259 "▁", 260 "a", 261 "b", 262 "▁a".
  GGUFFile sf(valid_spm().write("spm"));
  auto spm = Tokenizer::from_gguf(sf);
  EXPECT_EQ(spm->encode("a a", true, false), (std::vector<int>{1, 262, 262}));
  EXPECT_EQ(spm->encode("ba", false, false), (std::vector<int>{259, 261, 260}));
  EXPECT_EQ(spm->encode("c", false, false), (std::vector<int>{259, 3 + 'c'}));  // byte fallback
  EXPECT_EQ(spm->decode({1, 262, 262}, false), "a a");
}

TEST(TokenizerGGUFErrors, MissingOrUnsupportedModel) {
  expect_gguf_error(valid_bpe().write("no-model", {"tokenizer.ggml.model"}),
                    {"tokenizer.ggml.model"});
  expect_gguf_error(valid_bpe().str("tokenizer.ggml.model", "bert").write("bert"),
                    {"tokenizer.ggml.model", "'bert'"});
  expect_gguf_error(valid_bpe().u32("tokenizer.ggml.model", 2).write("model-int"),
                    {"tokenizer.ggml.model"});
}

TEST(TokenizerGGUFErrors, TokensMissingOrMistyped) {
  expect_gguf_error(valid_bpe().write("no-tokens", {"tokenizer.ggml.tokens"}),
                    {"tokenizer.ggml.tokens"});
  expect_gguf_error(valid_bpe().i32s("tokenizer.ggml.tokens", {1, 2, 3}).write("tokens-int"),
                    {"tokenizer.ggml.tokens"});
  expect_gguf_error(valid_bpe().strings("tokenizer.ggml.tokens", {}).write("tokens-empty"),
                    {"tokenizer.ggml.tokens", "empty"});
}

TEST(TokenizerGGUFErrors, UnknownPreTokenizer) {
  expect_gguf_error(valid_bpe().str("tokenizer.ggml.pre", "nonsense-pre").write("pre"),
                    {"tokenizer.ggml.pre", "'nonsense-pre'", "llama-bpe"});
}

TEST(TokenizerGGUFErrors, TokenTypes) {
  expect_gguf_error(valid_bpe().i32s("tokenizer.ggml.token_type", {1, 1}).write("types-short"),
                    {"tokenizer.ggml.token_type", "2 entries for 258 tokens"});
  std::vector<int32_t> types(258, 1);
  types[7] = 9;
  expect_gguf_error(valid_bpe().i32s("tokenizer.ggml.token_type", types).write("types-value"),
                    {"tokenizer.ggml.token_type[7] = 9"});
  expect_gguf_error(valid_bpe()
                        .strings("tokenizer.ggml.token_type", std::vector<std::string>(258, "x"))
                        .write("types-strings"),
                    {"tokenizer.ggml.token_type"});
}

TEST(TokenizerGGUFErrors, SpecialIds) {
  expect_gguf_error(valid_bpe().u32("tokenizer.ggml.bos_token_id", 258).write("bos-range"),
                    {"tokenizer.ggml.bos_token_id = 258", "[0, 258)"});
  expect_gguf_error(valid_bpe().str("tokenizer.ggml.eos_token_id", "2").write("eos-string"),
                    {"tokenizer.ggml.eos_token_id"});
  expect_gguf_error(valid_bpe().str("tokenizer.ggml.add_bos_token", "yes").write("add-bos"),
                    {"tokenizer.ggml.add_bos_token"});
}

TEST(TokenizerGGUFErrors, Merges) {
  expect_gguf_error(valid_bpe().write("no-merges", {"tokenizer.ggml.merges"}),
                    {"tokenizer.ggml.merges"});
  expect_gguf_error(valid_bpe().strings("tokenizer.ggml.merges", {"a b", "ab"}).write("merge-form"),
                    {"tokenizer.ggml.merges[1] = 'ab'"});
  expect_gguf_error(
      valid_bpe().strings("tokenizer.ggml.merges", {"a b", "ab zz"}).write("merge-text"),
      {"merge 1", "'zz'"});
}

TEST(TokenizerGGUFErrors, SentencePieceScores) {
  expect_gguf_error(valid_spm().write("no-scores", {"tokenizer.ggml.scores"}),
                    {"tokenizer.ggml.scores"});
  expect_gguf_error(valid_spm().f32s("tokenizer.ggml.scores", {0.0f}).write("scores-short"),
                    {"tokenizer.ggml.scores", "1 entries for 263 tokens"});
}

// ---- tokenizer.json ----------------------------------------------------------

namespace {

// A byte-level tokenizer.json like the GGUF one above, as JSON to modify.
json valid_hf() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::byte_text(static_cast<uint8_t>(b))] = b;
  vocab["ab"] = 256;
  vocab[byte_level::byte_text(0xC3) + byte_level::byte_text(0xA9)] = 257;  // "é"
  return json{
      {"version", "1.0"},
      {"added_tokens", json::array({{{"id", 258}, {"content", "<|end|>"}, {"special", true}},
                                    {{"id", 259}, {"content", "<tool>"}, {"special", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array(
             {{{"type", "Split"},
               {"pattern", {{"Regex", R"(\p{L}+|\s+|[^\s\p{L}]+)"}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges",
         json::array({"a b", byte_level::byte_text(0xC3) + " " + byte_level::byte_text(0xA9)})}}},
  };
}

std::string write_json(const json& j, const std::string& name) {
  std::string dir = test::temp_dir("tok-json-" + name);
  std::string path = dir + "/tokenizer.json";
  std::ofstream(path) << j.dump();
  return path;
}

void expect_hf_error(const std::string& path, const std::vector<std::string>& parts) {
  try {
    Tokenizer::from_hf_json(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path.substr(0, path.rfind('/'))), std::string::npos) << msg;
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

}  // namespace

TEST(TokenizerJsonErrors, ValidFileLoads) {
  auto tok = Tokenizer::from_hf_json(write_json(valid_hf(), "valid"));
  EXPECT_EQ(tok->kind(), "bpe");
  EXPECT_EQ(tok->encode("abc<|end|>", false, true), (std::vector<int>{256, 'c', 258}));
  // <tool> is not special (user-defined): matched even without parse_special.
  EXPECT_EQ(tok->encode("<tool>", false, false), (std::vector<int>{259}));
  EXPECT_TRUE(tok->is_special(258));
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->bos_id(), -1);
  EXPECT_THROW(tok->encode("x", true, false), Error);  // no BOS to add
}

TEST(TokenizerJsonErrors, NfcNormalizer) {
  json j = valid_hf();
  auto plain = Tokenizer::from_hf_json(write_json(j, "no-nfc"));
  j["normalizer"] = {{"type", "NFC"}};
  auto nfc = Tokenizer::from_hf_json(write_json(j, "nfc"));
  // "e" + COMBINING ACUTE becomes "é" (token 257) only with the normalizer.
  EXPECT_EQ(nfc->encode("é", false, false), (std::vector<int>{257}));
  EXPECT_EQ(nfc->encode("é", false, false), (std::vector<int>{257}));
  EXPECT_EQ(plain->encode("é", false, false).size(), 3u);
}

TEST(TokenizerJsonErrors, PostProcessorAndConfigGiveBos) {
  json j = valid_hf();
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<|end|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
  std::string path = write_json(j, "template");
  auto tok = Tokenizer::from_hf_json(path);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->bos_id(), 258);
  EXPECT_EQ(tok->encode("ab", tok->add_bos(), true), (std::vector<int>{258, 256}));

  // tokenizer_config.json beside it overrides add_bos_token and names EOS.
  std::string dir = path.substr(0, path.rfind('/'));
  std::ofstream(dir + "/tokenizer_config.json")
      << json{{"add_bos_token", false}, {"eos_token", {{"content", "<|end|>"}}}}.dump();
  tok = Tokenizer::from_hf_json(path);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->eos_id(), 258);

  std::ofstream(dir + "/tokenizer_config.json") << json{{"eos_token", "<|missing|>"}}.dump();
  try {
    Tokenizer::from_hf_json(path);
    ADD_FAILURE() << "no error for an EOS that is not in the vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("<|missing|>"), std::string::npos) << e.what();
  }
}

TEST(TokenizerJsonErrors, MalformedJson) {
  std::string text = valid_hf().dump();
  std::string path = test::temp_dir("tok-json-truncated") + "/tokenizer.json";
  std::ofstream(path) << text.substr(0, text.size() / 2);
  expect_hf_error(path, {"not valid JSON"});
  expect_hf_error(write_json(json::array({1, 2}), "array"), {"JSON object"});
  expect_hf_error(test::temp_dir("tok-json-missing") + "/tokenizer.json", {"cannot open"});
}

TEST(TokenizerJsonErrors, UnsupportedModelOrFields) {
  json j = valid_hf();
  j["model"]["type"] = "WordPiece";
  expect_hf_error(write_json(j, "wordpiece"), {"model.type", "WordPiece"});
  j = valid_hf();
  j["model"].erase("vocab");
  expect_hf_error(write_json(j, "no-vocab"), {"model.vocab"});
  j = valid_hf();
  j["model"]["vocab"]["zz"] = "seven";
  expect_hf_error(write_json(j, "vocab-id"), {R"(model.vocab["zz"])"});
  j = valid_hf();
  j["model"]["merges"].push_back(42);
  expect_hf_error(write_json(j, "merge-num"), {"model.merges[2]"});
  j = valid_hf();
  j["model"]["merges"].push_back("a b c");
  expect_hf_error(write_json(j, "merge-3"), {"model.merges[2]"});
  j = valid_hf();
  j["model"]["merges"].push_back("q zz");
  expect_hf_error(write_json(j, "merge-unknown"), {"merge 2", "'zz'"});
}

TEST(TokenizerJsonErrors, UnsupportedNormalizerOrPreTokenizer) {
  json j = valid_hf();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_hf_error(write_json(j, "lowercase"), {"normalizer", "Lowercase"});
  j = valid_hf();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  expect_hf_error(write_json(j, "metaspace"), {"pre_tokenizer", "Metaspace"});
  j = valid_hf();
  j["pre_tokenizer"] = nullptr;
  expect_hf_error(write_json(j, "no-pre"), {"byte-level"});
  j = valid_hf();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  expect_hf_error(write_json(j, "bad-regex"), {"regex", "(unclosed"});
  j = valid_hf();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious";
  expect_hf_error(write_json(j, "behavior"), {"MergedWithPrevious"});
}

TEST(TokenizerJsonErrors, AddedTokenConflicts) {
  json j = valid_hf();
  j["added_tokens"].push_back({{"id", 256}, {"content", "<other>"}, {"special", true}});
  expect_hf_error(write_json(j, "conflict"), {"added_tokens[2]", "id 256"});
  j = valid_hf();
  j["added_tokens"].push_back({{"content", "<no-id>"}});
  expect_hf_error(write_json(j, "no-id"), {"added_tokens[2]"});
}
