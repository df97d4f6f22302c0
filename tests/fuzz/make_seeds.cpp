// Writes the seed corpora of the fuzz targets into OUT/<target>/: small files
// of each input format, derived from real files where the checkout has them
// (the vocab-only GGUFs, the Llama 3 tokenizer files and chat cases in
// ../shared, the models in the cache when fetched) and from the synthetic test
// models (complete files with tensors, every supported architecture option).
// Real files are shrunk (metadata arrays and vocabularies cut to a few hundred
// entries) so that each fuzzing run takes milliseconds, not seconds.
//   fuzz_seeds OUT
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "hf_fixture.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "support/synthetic_model.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace tandem;

namespace {

constexpr size_t kKeepArray = 300;  // array elements / vocabulary entries kept from real files

fs::path g_out;
int g_written = 0;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_seed(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(g_out / target);
  std::ofstream(g_out / target / name, std::ios::binary) << bytes;
  ++g_written;
}

fs::path source_dir() { return TANDEM_SOURCE_DIR; }
fs::path shared_dir() { return source_dir() / ".." / "shared" / "testdata"; }
fs::path model_cache() {
  if (const char* c = std::getenv("TANDEM_CACHE"); c && *c) return fs::path(c) / "models";
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/tmp") / ".cache" / "tandem" / "models";
}

// A GGUF file's metadata with every array cut to kKeepArray elements and no
// tensors: the header a real model or vocabulary starts with, small.
std::string shrunk_gguf(const fs::path& src, const fs::path& tmp) {
  GGUFFile f(src.string());
  GGUFWriter w(f.alignment());
  for (const auto& [key, value] : f.metadata()) {
    GGUFValue v = value;
    if (v.is_array() && v.array.size() > kKeepArray) v.array.resize(kKeepArray);
    w.set(key, v);
  }
  w.write(tmp.string());
  return read_file(tmp);
}

std::vector<test::SyntheticSpec> synthetic_specs() {
  std::vector<test::SyntheticSpec> specs;
  const test::SyntheticSpec tiny = fuzz::tiny_spec();
  specs.push_back(tiny);  // llama, F32
  auto qwen = tiny;
  qwen.arch = Arch::Qwen2;
  qwen.weight_type = DType::Q8_0;
  qwen.tied_embeddings = true;
  specs.push_back(qwen);
  auto scaled = tiny;
  scaled.llama3_rope_scaling = true;
  scaled.weight_type = DType::F16;
  specs.push_back(scaled);
  auto legacy = tiny;
  legacy.weight_type = DType::Q4_1;
  legacy.embed_type = DType::Q8_0;
  specs.push_back(legacy);
  return specs;
}

void gguf_seeds(const fs::path& tmp) {
  int i = 0;
  for (const auto& spec : synthetic_specs())
    write_seed("gguf", fmt::format("synthetic-{}.gguf", i++),
               read_file(test::write_synthetic_gguf(spec, (tmp / "s.gguf").string())));
  for (const auto& e : fs::directory_iterator(shared_dir() / "tokenizers" / "llamacpp-vocab"))
    if (e.path().extension() == ".gguf")
      write_seed("gguf", e.path().filename().string(), shrunk_gguf(e.path(), tmp / "v.gguf"));
  for (const char* m :
       {"smollm2-135m-instruct-q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"})
    if (fs::exists(model_cache() / m))
      write_seed("gguf", std::string("header-") + m,
                 shrunk_gguf(model_cache() / m, tmp / "m.gguf"));
}

void hf_seeds(const fs::path& tmp) {
  int i = 0;
  for (auto spec : synthetic_specs()) {
    if (spec.weight_type != DType::F32 && spec.weight_type != DType::F16)
      spec.weight_type = DType::F32;
    const fs::path dir = tmp / fmt::format("hf{}", i);
    test::write_synthetic_hf_dir(spec, dir.string());
    write_seed("safetensors", fmt::format("synthetic-{}.safetensors", i),
               read_file(dir / "model.safetensors"));
    write_seed("hf_config", fmt::format("synthetic-{}.json", i), read_file(dir / "config.json"));
    write_seed("tokenizer_json", fmt::format("synthetic-{}.json", i),
               read_file(dir / "tokenizer.json"));
    write_seed("tokenizer_config", fmt::format("synthetic-{}.json", i),
               read_file(dir / "tokenizer_config.json"));
    ++i;
  }
  // Sharded checkpoints' shards, and headers the writer would not make.
  test::SyntheticSpec spec = synthetic_specs()[0];
  test::write_synthetic_hf_dir(spec, (tmp / "sharded").string(), true);
  for (const auto& e : fs::directory_iterator(tmp / "sharded"))
    if (e.path().extension() == ".safetensors")
      write_seed("safetensors", "shard-" + e.path().filename().string(), read_file(e.path()));
  write_seed("safetensors", "metadata-and-other-dtypes.safetensors",
             test::raw_safetensors(
                 R"({"__metadata__": {"format": "pt"}, "ids": {"dtype": "I64", "shape": [2],)"
                 R"( "data_offsets": [0, 16]}, "w": {"dtype": "BF16", "shape": [2, 2],)"
                 R"( "data_offsets": [16, 24]}})",
                 std::string(24, '\x01')));
  write_seed("safetensors", "unpadded.safetensors",
             test::raw_safetensors(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                   std::string(4, '\0')));
}

// The Llama 3 tokenizer.json cut to its first kKeepArray vocabulary entries,
// the merges among them and all its added tokens.
void tokenizer_seeds() {
  const fs::path dir = shared_dir() / "tokenizers" / "llama3";
  json tok = json::parse(read_file(dir / "tokenizer.json"));
  json& model = tok["model"];
  json vocab = json::object();
  std::set<std::string> kept;
  for (const auto& [text, id] : model["vocab"].items())
    if (id.get<int64_t>() < static_cast<int64_t>(kKeepArray)) {
      vocab[text] = id;
      kept.insert(text);
    }
  json merges = json::array();
  for (const auto& m : model["merges"]) {
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m;
      a = s.substr(0, s.find(' '));
      b = s.substr(s.find(' ') + 1);
    } else {
      a = m[0];
      b = m[1];
    }
    if (kept.count(a) && kept.count(b) && kept.count(a + b)) merges.push_back(m);
  }
  model["vocab"] = vocab;
  model["merges"] = merges;
  json added = json::array();
  int next = static_cast<int>(kKeepArray);
  for (auto t : tok["added_tokens"]) {  // renumbered after the kept vocabulary
    if (next >= static_cast<int>(kKeepArray) + 16) break;
    t["id"] = next++;
    added.push_back(t);
  }
  tok["added_tokens"] = added;
  write_seed("tokenizer_json", "llama3-shrunk.json", tok.dump(1));

  json cfg = json::parse(read_file(dir / "tokenizer_config.json"));
  write_seed("tokenizer_config", "llama3.json", cfg.dump(1));
  json named = cfg;
  named["chat_template"] = json::array({{{"name", "default"}, {"template", cfg["chat_template"]}},
                                        {{"name", "tool_use"}, {"template", "{{ tools }}"}}});
  named["bos_token"] = {{"content", "<|begin_of_text|>"}, {"lstrip", false}};
  write_seed("tokenizer_config", "llama3-named-templates.json", named.dump(1));
}

std::string chat_input(uint8_t flags, const std::string& tmpl, const json& messages) {
  std::string s(1, static_cast<char>(flags));
  s += tmpl;
  for (const auto& m : messages) {
    s += '\0';
    s += m.value("role", "");
    s += '\0';
    s += m.value("content", "");
  }
  return s;
}

void chat_seeds(const fs::path& tmp) {
  const json cases = json::parse(read_file(shared_dir() / "chat" / "llama3-chat-cases.json"));
  const std::string llama3 = json::parse(
      read_file(shared_dir() / "tokenizers" / "llama3" / "tokenizer_config.json"))["chat_template"];
  std::vector<std::string> templates = {llama3};
  for (auto spec : synthetic_specs()) {
    GGUFFile f(test::write_synthetic_gguf(spec, (tmp / "c.gguf").string()));
    if (auto t = f.opt_string("tokenizer.chat_template")) templates.push_back(*t);
  }
  for (const char* m :
       {"smollm2-135m-instruct-q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"})
    if (fs::exists(model_cache() / m))
      if (auto t = GGUFFile((model_cache() / m).string()).opt_string("tokenizer.chat_template"))
        templates.push_back(*t);
  int i = 0;
  for (size_t t = 0; t < templates.size(); ++t)
    for (size_t c = 0; c < cases.size() && c < 4; ++c)
      write_seed("chat_template", fmt::format("case-{}", i++),
                 chat_input(static_cast<uint8_t>(c & 3), templates[t], cases[c]["messages"]));
}

void request_seeds() {
  const std::vector<std::pair<int, std::string>> bodies = {
      {0, R"({"model": "m", "prompt": "Once upon a time", "max_tokens": 16})"},
      {0, R"({"prompt": [1, 2, 3], "temperature": 0, "stop": ["\n", "END"], "seed": 7})"},
      {0, R"({"prompt": ["one"], "stream": true, "stream_options": {"include_usage": true}})"},
      {0, R"({"prompt": "x", "n": 1, "best_of": 1, "echo": false, "logprobs": 0, "top_p": 0.9,)"
          R"( "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "repeat_last_n": 64,)"
          R"( "presence_penalty": 0, "frequency_penalty": 0, "logit_bias": {}, "suffix": "",)"
          R"( "ignore_eos": true, "speculate": false, "user": "u"})"},
      {1, R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."},)"
          R"( {"role": "user", "content": "Hi"}], "max_tokens": 32})"},
      {1, R"({"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"},)"
          R"( {"type": "text", "text": "b"}]}, {"role": "assistant", "content": "c",)"
          R"( "tool_calls": []}], "max_completion_tokens": 5, "temperature": 0.7,)"
          R"( "tools": [], "tool_choice": "none", "response_format": {"type": "text"},)"
          R"( "logprobs": false, "top_logprobs": 0, "stream": false})"},
      {1, R"({"messages": [{"role": "user", "content": "x"}], "n": 2, "logprobs": true})"},
      {0, R"({"prompt": "x", "max_tokens": 9223372036854775807, "temperature": -1})"},
  };
  int i = 0;
  for (const auto& [endpoint, body] : bodies)
    write_seed("openai_request", fmt::format("body-{}", i++),
               std::string(1, static_cast<char>(endpoint)) + body);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT\n", argv[0]);
    return 2;
  }
  g_out = argv[1];
  const fs::path tmp = g_out / ".tmp";
  try {
    fs::create_directories(tmp);
    gguf_seeds(tmp);
    hf_seeds(tmp);
    tokenizer_seeds();
    chat_seeds(tmp);
    request_seeds();
    fs::remove_all(tmp);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::printf("fuzz_seeds: %d seed files in %s\n", g_written, g_out.c_str());
  return 0;
}
