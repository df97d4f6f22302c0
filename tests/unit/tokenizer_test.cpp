// Tokenizer conformance: ids must equal the reference exactly, every case.
//  - llama.cpp's vocabulary tests (../shared/testdata/tokenizers/llamacpp-vocab):
//    reference ids from the Hugging Face tokenizers, no BOS, special-token text
//    not parsed. llama-bpe uses the Llama 3 tokenizer.json, qwen2 the tokenizer
//    of a real Qwen2.5-Coder GGUF.
//  - Llama 3 cases.json (transformers.js): no BOS, special-token text parsed.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/gguf_reader.h"
#include "support/paths.h"

using namespace tandem;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string vocab_dir() { return test::shared_testdata_dir() + "/tokenizers/llamacpp-vocab"; }
std::string llama3_dir() { return test::shared_testdata_dir() + "/tokenizers/llama3"; }

struct Case {
  std::string text;
  std::vector<int> ids;
};

// .inp: each string is followed by a line "__ggml_vocab_test__" (so an empty
// string is an empty line before it); .out: one line of ids per string.
std::vector<Case> read_vocab_cases(const std::string& name) {
  const std::string base = vocab_dir() + "/ggml-vocab-" + name + ".gguf";
  const std::string inp = read_file(base + ".inp"), out = read_file(base + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0;;) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    cases.push_back({inp.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (i >= cases.size()) {
      ADD_FAILURE() << name << ": more id lines than strings";
      break;
    }
    std::istringstream ids(line);
    for (int id; ids >> id;) cases[i].ids.push_back(id);
    ++i;
  }
  EXPECT_EQ(i, cases.size()) << name << ": strings and id lines differ in number";
  return cases;
}

std::string show(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
  return s;
}

// Encodes every case and reports how many match; all must.
void expect_all_match(const Tokenizer& tok, const std::vector<Case>& cases, const std::string& name,
                      bool parse_special) {
  ASSERT_FALSE(cases.empty()) << name;
  size_t pass = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto got = tok.encode(cases[i].text, false, parse_special);
    if (got == cases[i].ids)
      ++pass;
    else
      ADD_FAILURE() << name << " case " << i << " " << nlohmann::json(cases[i].text).dump()
                    << "\n  expected: " << show(cases[i].ids) << "\n  got:      " << show(got);
  }
  std::cout << "[ conform  ] " << name << ": " << pass << "/" << cases.size() << " cases match\n";
  EXPECT_EQ(pass, cases.size());
}

// Loaded once for the two tests that use it (tokenizer.json takes a moment).
const Tokenizer& llama3_tokenizer() {
  static auto tok = Tokenizer::from_hf_json(llama3_dir() + "/tokenizer.json");
  return *tok;
}

void check_gguf_vocab(const std::string& name, const std::string& gguf_path) {
  GGUFFile f(gguf_path);
  auto tok = Tokenizer::from_gguf(f);
  expect_all_match(*tok, read_vocab_cases(name), name, /*parse_special=*/false);
}

}  // namespace

TEST(TokenizerConformance, DeepseekCoder) {
  check_gguf_vocab("deepseek-coder", vocab_dir() + "/ggml-vocab-deepseek-coder.gguf");
}
TEST(TokenizerConformance, Gpt2) {
  check_gguf_vocab("gpt-2", vocab_dir() + "/ggml-vocab-gpt-2.gguf");
}
TEST(TokenizerConformance, LlamaSpm) {
  check_gguf_vocab("llama-spm", vocab_dir() + "/ggml-vocab-llama-spm.gguf");
}
TEST(TokenizerConformance, Phi3) {
  check_gguf_vocab("phi-3", vocab_dir() + "/ggml-vocab-phi-3.gguf");
}
TEST(TokenizerConformance, Starcoder) {
  check_gguf_vocab("starcoder", vocab_dir() + "/ggml-vocab-starcoder.gguf");
}
TEST(TokenizerConformance, Qwen2FromModelGguf) {
  check_gguf_vocab("qwen2", test::cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"));
}
TEST(TokenizerConformance, LlamaBpeFromTokenizerJson) {
  expect_all_match(llama3_tokenizer(), read_vocab_cases("llama-bpe"), "llama-bpe",
                   /*parse_special=*/false);
}

TEST(TokenizerConformance, Llama3CasesJson) {
  auto j = nlohmann::json::parse(read_file(llama3_dir() + "/cases.json"));
  std::vector<Case> cases;
  for (const auto& c : j) cases.push_back({c.at("text"), c.at("ids")});
  expect_all_match(llama3_tokenizer(), cases, "llama3 cases.json", /*parse_special=*/true);
}
