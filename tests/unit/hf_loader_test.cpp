// Hugging Face model directories: config.json parsing, tensor renaming, the
// llama q/k permutation, tokenizer side files, and damaged inputs (HF and GGUF)
// that must each give one tandem::Error naming the file and the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "model/hf_loader.h"
#include "model/model.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"

using namespace tandem;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Runs f, which must throw tandem::Error whose message contains every word.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& words) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << words[0];
  } catch (const Error& e) {
    for (const auto& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
          << "'" << w << "' not in: " << e.what();
  }
}

void expect_load_error(const std::string& path, const std::vector<std::string>& words) {
  expect_error([&] { Model::load(path); }, words);
}

test::SyntheticSpec small_spec(Arch arch) {
  test::SyntheticSpec s;
  s.arch = arch;
  s.with_tokenizer = false;  // error tests need no tokenizer
  return s;
}

json read_json(const std::string& path) { return json::parse(test::read_file(path)); }
void write_json(const std::string& path, const json& j) { test::write_file(path, j.dump(2)); }

// A safetensors tensor in its raw form, for rebuilding damaged files.
struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;  // outermost first, as the file stores it
  std::string bytes;
};

std::vector<RawTensor> read_raw(const std::string& path) {
  SafetensorsFile f(path);
  std::vector<RawTensor> out;
  for (const auto& t : f.tensors())
    out.push_back({t.name,
                   safetensors_dtype_name(t.type),
                   {t.shape.rbegin(), t.shape.rend()},
                   std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
  return out;
}

// The header is padded to 8 bytes plus `skew` spaces (skew 1 puts every tensor
// at an odd address, as unpadded headers of older writers can).
void write_raw(const std::string& path, const std::vector<RawTensor>& tensors, int skew = 0) {
  json header = json::object();
  std::string data;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8 + skew, ' ');
  test::write_file(path, test::raw_safetensors(text, data));
}

// Rewrites a safetensors file through `edit`.
void edit_safetensors(const std::string& path,
                      const std::function<void(std::vector<RawTensor>&)>& edit) {
  auto tensors = read_raw(path);
  edit(tensors);
  write_raw(path, tensors);
}

RawTensor* find_raw(std::vector<RawTensor>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

// A copy of a GGUF file's metadata and tensors in a writer; `hook` may take over
// a tensor (return true) to drop or replace it.
GGUFWriter copy_gguf(const GGUFFile& f,
                     const std::function<bool(const TensorView&, GGUFWriter&)>& hook = {}) {
  GGUFWriter w(f.alignment());
  for (const auto& [k, v] : f.metadata())
    if (k != "general.alignment") w.set(k, v);
  for (const auto& t : f.tensors())
    if (!hook || !hook(t, w))
      w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  return w;
}

}  // namespace

// ---- Pure functions ----------------------------------------------------------

TEST(HFLoader, QKPermutationOnAHandMadeExample) {
  // numpy: w.reshape(n_head, 2, d/2, cols).swapaxes(1, 2).reshape(rows, cols).
  // Two heads of 4 rows: each head's halves [0 1 | 2 3] interleave to 0 2 1 3.
  EXPECT_EQ(llama_qk_row_order(8, 2), (std::vector<int64_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  // One head of 6 rows: halves [0 1 2 | 3 4 5] -> 0 3 1 4 2 5.
  EXPECT_EQ(llama_qk_row_order(6, 1), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  // Rows of 2 bytes each, rows labelled by their first byte.
  std::vector<uint8_t> m = {10, 11, 20, 21, 30, 31, 40, 41};  // 4 rows x 2 bytes, 1 head
  EXPECT_EQ(permute_llama_qk_rows(m.data(), 4, 2, 1),
            (std::vector<uint8_t>{10, 11, 30, 31, 20, 21, 40, 41}));
  EXPECT_THROW(llama_qk_row_order(6, 2), Error);  // heads of 3 rows cannot be halved
}

TEST(HFLoader, TensorNames) {
  const std::pair<const char*, const char*> names[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
      {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
      {"model.layers.12.self_attn.q_proj.weight", "blk.12.attn_q.weight"},
      {"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight"},
      {"model.layers.1.self_attn.v_proj.weight", "blk.1.attn_v.weight"},
      {"model.layers.1.self_attn.o_proj.weight", "blk.1.attn_output.weight"},
      {"model.layers.3.self_attn.q_proj.bias", "blk.3.attn_q.bias"},
      {"model.layers.3.self_attn.k_proj.bias", "blk.3.attn_k.bias"},
      {"model.layers.3.self_attn.v_proj.bias", "blk.3.attn_v.bias"},
      {"model.layers.7.post_attention_layernorm.weight", "blk.7.ffn_norm.weight"},
      {"model.layers.7.mlp.gate_proj.weight", "blk.7.ffn_gate.weight"},
      {"model.layers.7.mlp.up_proj.weight", "blk.7.ffn_up.weight"},
      {"model.layers.7.mlp.down_proj.weight", "blk.7.ffn_down.weight"},
  };
  for (const auto& [hf, gguf] : names) EXPECT_EQ(hf_to_gguf_tensor_name(hf), gguf) << hf;
  for (const char* ignored :
       {"model.layers.0.self_attn.rotary_emb.inv_freq", "model.layers.x.mlp.up_proj.weight",
        "model.layers..mlp.up_proj.weight", "vision_tower.blocks.0.weight",
        "model.layers.0.mlp.up_proj.weight.extra", ""})
    EXPECT_EQ(hf_to_gguf_tensor_name(ignored), std::nullopt) << ignored;
}

TEST(HFConfig, LlamaWithLlama3RopeScaling) {
  json j = {{"architectures", {"LlamaForCausalLM"}},
            {"hidden_size", 2048},
            {"intermediate_size", 8192},
            {"num_hidden_layers", 16},
            {"num_attention_heads", 32},
            {"num_key_value_heads", 8},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 500000.0},
            {"max_position_embeddings", 131072},
            {"vocab_size", 128256},
            {"tie_word_embeddings", true},
            {"rope_scaling",
             {{"rope_type", "llama3"},
              {"factor", 32.0},
              {"low_freq_factor", 1.0},
              {"high_freq_factor", 4.0},
              {"original_max_position_embeddings", 8192}}}};
  ModelConfig c = config_from_hf_json(j, "x/config.json");
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.arch_name, "llama");
  EXPECT_EQ(c.d_model, 2048);
  EXPECT_EQ(c.d_ff, 8192);
  EXPECT_EQ(c.n_layers, 16);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.context_length, 131072);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_EQ(c.rope_scaling.original_context_length, 8192);
  EXPECT_EQ(c.rope_freq_factors, llama3_rope_factors(c));
  ASSERT_EQ(c.rope_freq_factors.size(), 32u);
  EXPECT_EQ(c.rope_freq_factors.front(), 1.0f);  // highest frequency: unscaled
  EXPECT_EQ(c.rope_freq_factors.back(), 32.0f);  // lowest: divided by factor
}

TEST(HFConfig, Qwen2DefaultsAndLinearScaling) {
  json j = {{"model_type", "qwen2"},
            {"hidden_size", 64},
            {"intermediate_size", 128},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 4},
            {"vocab_size", 300},
            {"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}};
  ModelConfig c = config_from_hf_json(j, "config.json");
  EXPECT_EQ(c.arch, Arch::Qwen2);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_EQ(c.rope_style, kernels::RopeStyle::NeoX);
  EXPECT_EQ(c.n_kv_heads, 4);  // defaults to the head count
  EXPECT_EQ(c.head_dim, 16);   // hidden / heads
  EXPECT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.norm_eps, 1e-6f);  // Qwen2Config default
  EXPECT_EQ(c.context_length, 32768);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::Linear);
  EXPECT_EQ(c.rope_scaling.factor, 2.0f);
  EXPECT_TRUE(c.rope_freq_factors.empty());

  json llama_bias = j;
  llama_bias.erase("model_type");
  llama_bias["architectures"] = {"LlamaForCausalLM"};
  llama_bias["attention_bias"] = true;
  llama_bias["rope_scaling"] = nullptr;
  ModelConfig lb = config_from_hf_json(llama_bias, "config.json");
  EXPECT_TRUE(lb.qkv_bias);
  EXPECT_EQ(lb.rope_scaling.type, RopeScaling::Type::None);
}

TEST(HFConfig, ErrorsNameTheFileAndField) {
  const json base = {{"architectures", {"LlamaForCausalLM"}},
                     {"hidden_size", 64},
                     {"intermediate_size", 128},
                     {"num_hidden_layers", 2},
                     {"num_attention_heads", 4},
                     {"vocab_size", 300}};
  auto with = [&](const char* key, json v) {
    json j = base;
    if (v.is_discarded()) {
      j.erase(key);
    } else {
      j[key] = v;
    }
    return j;
  };
  const json drop = json(json::value_t::discarded);
  struct Case {
    json j;
    std::vector<std::string> words;
  };
  const Case cases[] = {
      {with("hidden_size", drop), {"hidden_size", "missing"}},
      {with("num_hidden_layers", "2"), {"num_hidden_layers", "integer"}},
      {with("rms_norm_eps", "small"), {"rms_norm_eps", "number"}},
      {with("tie_word_embeddings", 1), {"tie_word_embeddings"}},
      {with("architectures", json::array({"MistralForCausalLM"})), {"MistralForCausalLM"}},
      {with("architectures", "LlamaForCausalLM"), {"architectures"}},
      {with("architectures", drop), {"architectures"}},
      {with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}), {"yarn"}},
      {with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}), {"low_freq_factor"}},
      {with("rope_scaling", {{"factor", 8.0}}), {"rope_scaling.rope_type"}},
      {with("hidden_act", "gelu"), {"gelu"}},
      {with("num_attention_heads", 3), {"head"}},      // 64 does not split into 3 heads
      {with("num_key_value_heads", 3), {"kv head"}},   // 4 heads into 3 groups
      {with("hidden_size", 0), {"embedding length"}},  // validate()
      {json::array(), {"not a JSON object"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.j.dump());
    auto words = c.words;
    words.push_back("m/config.json");
    expect_error([&] { config_from_hf_json(c.j, "m/config.json"); }, words);
  }
}

// ---- Loading directories -----------------------------------------------------

TEST(HFLoader, LoadsLlamaAndPermutesQK) {
  auto dir = test::write_synthetic_hf_dir(small_spec(Arch::Llama), test::temp_dir("hf") + "/m");
  EXPECT_TRUE(is_hf_model_dir(dir));
  HFModelFiles hf = load_hf_model_dir(dir);
  const ModelConfig& c = hf.config;
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.rope_style, kernels::RopeStyle::Normal);  // q/k now in GGUF layout
  EXPECT_EQ(c.name, "m");
  EXPECT_FALSE(c.tied_embeddings);
  // 9 per layer + embeddings, final norm, LM head.
  EXPECT_EQ(hf.tensors.tensors.size(), size_t(9 * c.n_layers + 3));

  SafetensorsFile raw(dir + "/model.safetensors");
  for (const char* which : {"q", "k"}) {
    const auto hf_name = fmt::format("model.layers.1.self_attn.{}_proj.weight", which);
    const TensorView* src = raw.find(hf_name);
    const TensorView* dst = hf.tensors.find(fmt::format("blk.1.attn_{}.weight", which));
    ASSERT_NE(dst, nullptr);
    EXPECT_EQ(dst->shape, src->shape);
    const int n_head = which[0] == 'q' ? c.n_heads : c.n_kv_heads;
    auto order = llama_qk_row_order(src->ne(1), n_head);
    for (int64_t r = 0; r < src->ne(1); ++r)
      ASSERT_EQ(0, std::memcmp(dst->row(r), src->row(order[r]), src->row_bytes())) << which << r;
  }
  // Other tensors stay in the memory map, unchanged: at the same distance from
  // one another as in the file.
  const std::string v_name = "model.layers.1.self_attn.v_proj.weight";
  const std::string e_name = "model.embed_tokens.weight";
  const TensorView* v = hf.tensors.find("blk.1.attn_v.weight");
  const TensorView* e = hf.tensors.find("token_embd.weight");
  EXPECT_EQ(v->data - e->data, raw.find(v_name)->data - raw.find(e_name)->data);
  EXPECT_EQ(0, std::memcmp(v->data, raw.find(v_name)->data, v->nbytes));
}

TEST(HFLoader, Qwen2KeepsLayoutAndBiases) {
  auto dir = test::write_synthetic_hf_dir(small_spec(Arch::Qwen2), test::temp_dir("hf") + "/q");
  HFModelFiles hf = load_hf_model_dir(dir);
  EXPECT_EQ(hf.config.rope_style, kernels::RopeStyle::NeoX);
  EXPECT_TRUE(hf.config.qkv_bias);
  SafetensorsFile raw(dir + "/model.safetensors");
  const TensorView* q = hf.tensors.find("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(
      0, std::memcmp(q->data, raw.find("model.layers.0.self_attn.q_proj.weight")->data, q->nbytes));
  EXPECT_NE(hf.tensors.find("blk.0.attn_k.bias"), nullptr);
  // Binding checks every shape.
  ModelWeights w = bind_weights(hf.config, hf.tensors);
  EXPECT_EQ(w.layers.size(), 2u);
  EXPECT_FALSE(w.layers[0].bq.empty());
}

TEST(HFLoader, LlamaAttentionBiasesArePermutedToo) {
  auto spec = small_spec(Arch::Llama);
  auto dir = test::write_synthetic_hf_dir(spec, test::temp_dir("hf") + "/b");
  json cfg = read_json(dir + "/config.json");
  cfg["attention_bias"] = true;
  write_json(dir + "/config.json", cfg);
  const int hd = spec.d_model / spec.n_heads;
  edit_safetensors(dir + "/model.safetensors", [&](std::vector<RawTensor>& ts) {
    for (int l = 0; l < spec.n_layers; ++l)
      for (auto [proj, heads] :
           {std::pair{"q", spec.n_heads}, {"k", spec.n_kv_heads}, {"v", spec.n_kv_heads}}) {
        // Bias value i = i, so the permuted order can be read off the values.
        std::vector<float> v(heads * hd);
        for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
        ts.push_back({fmt::format("model.layers.{}.self_attn.{}_proj.bias", l, proj),
                      "F32",
                      {int64_t(v.size())},
                      std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)});
      }
  });
  HFModelFiles hf = load_hf_model_dir(dir);
  EXPECT_TRUE(hf.config.qkv_bias);
  for (auto [name, heads] :
       {std::pair{"blk.1.attn_q.bias", spec.n_heads}, {"blk.1.attn_k.bias", spec.n_kv_heads}}) {
    const TensorView* b = hf.tensors.find(name);
    ASSERT_NE(b, nullptr) << name;
    const float* p = reinterpret_cast<const float*>(b->data);
    auto order = llama_qk_row_order(heads * hd, heads);
    for (int i = 0; i < heads * hd; ++i) ASSERT_EQ(p[i], float(order[i])) << name << " " << i;
  }
  const float* v = reinterpret_cast<const float*>(hf.tensors.find("blk.1.attn_v.bias")->data);
  EXPECT_EQ(v[1], 1.0f);  // v is not rotated: unchanged
  bind_weights(hf.config, hf.tensors);
}

TEST(HFLoader, SideFiles) {
  auto dir = test::write_synthetic_hf_dir(small_spec(Arch::Llama), test::temp_dir("hf") + "/s");
  // No tokenizer files: nothing found, no error.
  HFModelFiles none = load_hf_model_dir(dir);
  EXPECT_EQ(none.tokenizer_json_path, "");
  EXPECT_EQ(none.chat_template, "");
  EXPECT_TRUE(none.eos_token_ids.empty());

  test::write_file(dir + "/tokenizer.json", "{}");
  write_json(
      dir + "/tokenizer_config.json",
      {{"chat_template",
        {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}}}});
  json cfg = read_json(dir + "/config.json");
  cfg["eos_token_id"] = 7;
  cfg["bos_token_id"] = 5;
  write_json(dir + "/config.json", cfg);
  HFModelFiles a = load_hf_model_dir(dir);
  EXPECT_EQ(a.tokenizer_json_path, dir + "/tokenizer.json");
  EXPECT_EQ(a.chat_template, "D");
  EXPECT_EQ(a.eos_token_ids, std::vector<int>{7});  // from config.json
  EXPECT_EQ(a.bos_token_id, 5);

  write_json(dir + "/generation_config.json", {{"eos_token_id", {3, 4}}, {"bos_token_id", 2}});
  write_json(dir + "/tokenizer_config.json", {{"chat_template", "S"}});
  HFModelFiles b = load_hf_model_dir(dir);
  EXPECT_EQ(b.eos_token_ids, (std::vector<int>{3, 4}));  // generation_config wins
  EXPECT_EQ(b.bos_token_id, 2);
  EXPECT_EQ(b.chat_template, "S");

  write_json(dir + "/generation_config.json", {{"eos_token_id", "x"}});
  expect_error([&] { load_hf_model_dir(dir); }, {"generation_config.json", "eos_token_id"});
  test::write_file(dir + "/tokenizer_config.json", "{oops");
  expect_error([&] { load_hf_model_dir(dir); }, {"tokenizer_config.json", "invalid JSON"});
}

TEST(HFLoader, ExtraTensorsAreIgnoredEvenInOtherDtypes) {
  auto dir = test::write_synthetic_hf_dir(small_spec(Arch::Llama), test::temp_dir("hf") + "/x");
  edit_safetensors(dir + "/model.safetensors", [](std::vector<RawTensor>& ts) {
    ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F64", {8}, std::string(64, 0)});
    ts.push_back({"vision_tower.patch_embed.weight", "F32", {2, 2}, std::string(16, 0)});
    ts.push_back({"model.position_ids", "I64", {4}, std::string(32, 0)});
  });
  HFModelFiles hf = load_hf_model_dir(dir);
  EXPECT_EQ(hf.tensors.tensors.size(), size_t(9 * 2 + 3));
  bind_weights(hf.config, hf.tensors);
}

TEST(HFLoader, MisalignedTensorsAreCopied) {
  auto dir = test::write_synthetic_hf_dir(small_spec(Arch::Qwen2), test::temp_dir("hf") + "/a");
  const std::string path = dir + "/model.safetensors";
  write_raw(path, read_raw(path), /*skew=*/1);
  SafetensorsFile raw(path);
  ASSERT_NE(reinterpret_cast<uintptr_t>(raw.find("model.norm.weight")->data) % 4, 0u);
  HFModelFiles hf = load_hf_model_dir(dir);
  for (const auto& [name, t] : hf.tensors.tensors)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4, 0u) << name;  // all F32 here
  const TensorView* norm = hf.tensors.find("output_norm.weight");
  EXPECT_EQ(0, std::memcmp(norm->data, raw.find("model.norm.weight")->data, norm->nbytes));
}

TEST(HFLoader, NoLMHeadMeansTied) {
  auto dir = test::write_synthetic_hf_dir(small_spec(Arch::Qwen2), test::temp_dir("hf") + "/t");
  edit_safetensors(dir + "/model.safetensors", [](std::vector<RawTensor>& ts) {
    ts.erase(std::remove_if(ts.begin(), ts.end(),
                            [](const RawTensor& t) { return t.name == "lm_head.weight"; }),
             ts.end());
  });
  HFModelFiles hf = load_hf_model_dir(dir);  // tie_word_embeddings is false in config.json
  EXPECT_TRUE(hf.config.tied_embeddings);
  EXPECT_EQ(hf.tensors.find("output.weight"), nullptr);
}

// ---- Damaged Hugging Face directories ----------------------------------------

TEST(HFLoaderErrors, ConfigProblems) {
  const auto root = test::temp_dir("hferr");
  auto fresh = [&](const std::string& name) {
    return test::write_synthetic_hf_dir(small_spec(Arch::Llama), root + "/" + name);
  };
  auto dir = fresh("noconfig");
  fs::remove(dir + "/config.json");
  expect_load_error(dir, {dir, "config.json"});
  expect_error([&] { load_hf_model_dir(dir); }, {"config.json", "missing"});

  dir = fresh("badjson");
  test::write_file(dir + "/config.json", "{\"hidden_size\": 64,");
  expect_load_error(dir, {"config.json", "invalid JSON"});

  dir = fresh("nohidden");
  json cfg = read_json(dir + "/config.json");
  cfg.erase("hidden_size");
  write_json(dir + "/config.json", cfg);
  expect_load_error(dir, {"config.json", "hidden_size"});

  dir = fresh("arch");
  cfg = read_json(dir + "/config.json");
  cfg["architectures"] = {"GPT2LMHeadModel"};
  write_json(dir + "/config.json", cfg);
  expect_load_error(dir, {"config.json", "GPT2LMHeadModel"});
}

TEST(HFLoaderErrors, TensorProblems) {
  const auto root = test::temp_dir("hferr");
  const auto spec = small_spec(Arch::Llama);
  auto fresh = [&](const std::string& name, bool sharded = false) {
    return test::write_synthetic_hf_dir(spec, root + "/" + name, sharded);
  };

  auto dir = fresh("missing");
  edit_safetensors(dir + "/model.safetensors", [](std::vector<RawTensor>& ts) {
    ts.erase(std::remove_if(
                 ts.begin(), ts.end(),
                 [](const RawTensor& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; }),
             ts.end());
  });
  expect_load_error(dir, {dir, "missing tensor", "blk.1.ffn_up.weight"});

  dir = fresh("shape");
  edit_safetensors(dir + "/model.safetensors", [&](std::vector<RawTensor>& ts) {
    auto* t = find_raw(ts, "model.layers.0.mlp.down_proj.weight");
    t->shape = {spec.d_model, spec.d_ff - 32};
    t->bytes.resize(size_t(spec.d_model) * (spec.d_ff - 32) * 4);
  });
  expect_load_error(dir, {dir, "blk.0.ffn_down.weight", "shape"});

  // A q projection of the wrong size must not upset the permutation.
  dir = fresh("qshape");
  edit_safetensors(dir + "/model.safetensors", [&](std::vector<RawTensor>& ts) {
    auto* t = find_raw(ts, "model.layers.0.self_attn.q_proj.weight");
    t->shape = {spec.d_model - 8, spec.d_model};
    t->bytes.resize(size_t(spec.d_model - 8) * spec.d_model * 4);
  });
  expect_load_error(dir, {dir, "blk.0.attn_q.weight", "shape"});

  dir = fresh("dtype");
  edit_safetensors(dir + "/model.safetensors", [&](std::vector<RawTensor>& ts) {
    auto* t = find_raw(ts, "model.layers.0.self_attn.v_proj.weight");
    t->dtype = "I8";
    t->bytes.resize(t->bytes.size() / 4);
  });
  expect_load_error(dir, {"model.safetensors", "model.layers.0.self_attn.v_proj.weight", "I8"});

  dir = fresh("truncated");
  std::string bytes = test::read_file(dir + "/model.safetensors");
  test::write_file(dir + "/model.safetensors", bytes.substr(0, bytes.size() - 100));
  expect_load_error(dir, {"model.safetensors", "truncated"});

  dir = fresh("noshard", true);
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  expect_load_error(
      dir, {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "does not exist"});

  dir = fresh("wrongshard", true);
  json index = read_json(dir + "/model.safetensors.index.json");
  index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  write_json(dir + "/model.safetensors.index.json", index);
  expect_load_error(dir,
                    {"model-00002-of-00002.safetensors", "model.embed_tokens.weight", "absent"});

  dir = fresh("escape", true);
  index = read_json(dir + "/model.safetensors.index.json");
  index["weight_map"]["model.embed_tokens.weight"] = "../elsewhere.safetensors";
  write_json(dir + "/model.safetensors.index.json", index);
  expect_load_error(dir, {"model.safetensors.index.json", "../elsewhere.safetensors"});

  dir = fresh("badindex", true);
  test::write_file(dir + "/model.safetensors.index.json", "[]");
  expect_load_error(dir, {"model.safetensors.index.json", "weight_map"});
}

// ---- Damaged GGUF models (through Model::load) --------------------------------

TEST(GGUFModelErrors, EachIsAClearError) {
  const auto dir = test::temp_dir("ggerr");
  const auto spec = small_spec(Arch::Llama);
  const auto good = test::write_synthetic_gguf(spec, dir + "/good.gguf");
  ASSERT_NO_THROW(Model::load(good));
  GGUFFile src(good);

  auto arch = copy_gguf(src);
  arch.set_string("general.architecture", "mamba");
  arch.write(dir + "/arch.gguf");
  expect_load_error(dir + "/arch.gguf", {"arch.gguf", "unsupported architecture 'mamba'"});

  copy_gguf(src, [](const TensorView& t, GGUFWriter&) {
    return t.name == "blk.1.ffn_gate.weight";
  }).write(dir + "/missing.gguf");
  expect_load_error(dir + "/missing.gguf",
                    {"missing.gguf", "missing tensor 'blk.1.ffn_gate.weight'"});

  copy_gguf(src, [&](const TensorView& t, GGUFWriter& w) {
    if (t.name != "blk.0.ffn_up.weight") return false;
    w.add_tensor_f32(t.name, DType::F32, {spec.d_model, spec.d_ff - 32},
                     std::vector<float>(size_t(spec.d_model) * (spec.d_ff - 32)));
    return true;
  }).write(dir + "/shape.gguf");
  expect_load_error(dir + "/shape.gguf", {"shape.gguf", "blk.0.ffn_up.weight", "shape"});

  // A type tandem knows but cannot compute with.
  copy_gguf(src, [&](const TensorView& t, GGUFWriter& w) {
    if (t.name != "blk.0.attn_v.weight") return false;
    w.add_tensor(t.name, DType::Q8_1, t.shape,
                 std::vector<uint8_t>(dtype_row_bytes(DType::Q8_1, t.ne(0)) * t.ne(1)));
    return true;
  }).write(dir + "/q81.gguf");
  expect_load_error(dir + "/q81.gguf", {"q81.gguf", "blk.0.attn_v.weight", "Q8_1"});

  // A type id nobody knows: patch the type field of one tensor info.
  std::string bytes = test::read_file(good);
  const std::string name = "blk.0.attn_v.weight";
  std::string needle(8, '\0');
  needle[0] = static_cast<char>(name.size());
  needle += name;
  size_t at = bytes.find(needle);
  ASSERT_NE(at, std::string::npos);
  at += needle.size() + 4 + 2 * 8;  // n_dims, two dimensions, then the type
  const uint32_t bogus = 99;
  bytes.replace(at, 4, reinterpret_cast<const char*>(&bogus), 4);
  test::write_file(dir + "/typeid.gguf", bytes);
  expect_load_error(dir + "/typeid.gguf", {"typeid.gguf", name, "type id 99"});

  bytes = test::read_file(good);
  test::write_file(dir + "/cut.gguf", bytes.substr(0, bytes.size() / 2));
  expect_load_error(dir + "/cut.gguf", {"cut.gguf", "truncated"});

  expect_load_error(dir + "/absent.gguf", {"absent.gguf"});
}
