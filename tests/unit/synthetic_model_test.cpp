// Synthetic test models: they load through Model::load with the configuration
// the spec asks for, GGUF tensors have the requested types, the GGUF and
// Hugging Face files (sharded or not) hold the same values, and both carry the
// same vocabulary. Nothing here runs the forward pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "model/hf_loader.h"
#include "model/model.h"
#include "quant/quants.h"
#include "support/paths.h"
#include "support/synthetic_model.h"
#include "support/test_util.h"
#include "tokenizer/tokenizer.h"

using namespace tandem;
using json = nlohmann::json;

namespace {

std::vector<float> to_floats(const TensorView& t) {
  std::vector<float> v(t.numel());
  dequantize_row(t.type, t.data, v.data(), t.numel());
  return v;
}

void expect_config(const ModelConfig& c, const test::SyntheticSpec& s) {
  EXPECT_EQ(c.arch, s.arch);
  EXPECT_EQ(c.n_layers, s.n_layers);
  EXPECT_EQ(c.d_model, s.d_model);
  EXPECT_EQ(c.n_heads, s.n_heads);
  EXPECT_EQ(c.n_kv_heads, s.n_kv_heads);
  EXPECT_EQ(c.head_dim, s.d_model / s.n_heads);
  EXPECT_EQ(c.d_ff, s.d_ff);
  EXPECT_EQ(c.vocab_size, s.vocab_size);
  EXPECT_EQ(c.context_length, s.context_length);
  EXPECT_EQ(c.rope_theta, s.rope_theta);
  EXPECT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.tied_embeddings, s.tied_embeddings);
  EXPECT_EQ(c.qkv_bias, s.arch == Arch::Qwen2);
  // GGUF llama and permuted HF llama both rotate adjacent pairs.
  EXPECT_EQ(c.rope_style,
            s.arch == Arch::Llama ? kernels::RopeStyle::Normal : kernels::RopeStyle::NeoX);
  EXPECT_EQ(c.rope_freq_factors.size(), s.llama3_rope_scaling ? size_t(c.head_dim / 2) : 0u);
}

void expect_loaded(const Model& m, const test::SyntheticSpec& s) {
  expect_config(m.config(), s);
  EXPECT_EQ(m.weights().layers.size(), size_t(s.n_layers));
  EXPECT_EQ(m.weights().tok_embd.ne(1), s.vocab_size);
  EXPECT_EQ(m.weights().layers[0].bq.empty(), s.arch == Arch::Llama);
  ASSERT_NE(m.tokenizer(), nullptr);
  EXPECT_EQ(m.tokenizer()->vocab_size(), s.vocab_size);
  EXPECT_EQ(m.tokenizer()->pre(), s.arch == Arch::Llama ? "llama-bpe" : "qwen2");
  EXPECT_EQ(m.tokenizer()->add_bos(), s.arch == Arch::Llama);
  const std::string eot = s.arch == Arch::Llama ? "<|eot_id|>" : "<|im_end|>";
  auto eot_id = m.tokenizer()->find_piece(eot);
  ASSERT_TRUE(eot_id.has_value());
  EXPECT_EQ(*eot_id, s.vocab_size - 1);  // the last special token
  EXPECT_TRUE(m.is_stop(*eot_id)) << eot;
  EXPECT_NE(m.chat_template().find(s.arch == Arch::Llama ? "<|start_header_id|>" : "<|im_start|>"),
            std::string::npos);
}

}  // namespace

TEST(SyntheticModel, GGUFLoadsAsSpecified) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2}) {
    test::SyntheticSpec s;
    s.arch = arch;
    s.n_layers = 3;
    s.context_length = 300;
    s.rope_theta = 500000.0f;
    s.tied_embeddings = arch == Arch::Qwen2;
    s.llama3_rope_scaling = arch == Arch::Llama;
    auto m = Model::load(test::write_synthetic_gguf(s, test::temp_dir("syn") + "/m.gguf"));
    EXPECT_EQ(m->format(), "gguf");
    expect_loaded(*m, s);
    EXPECT_EQ(m->tensors().find("output.weight") == nullptr, s.tied_embeddings);
  }
}

TEST(SyntheticModel, HFLoadsAsSpecified) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2})
    for (bool sharded : {false, true}) {
      test::SyntheticSpec s;
      s.arch = arch;
      s.weight_type = DType::BF16;
      s.tied_embeddings = arch == Arch::Llama;
      s.llama3_rope_scaling = arch == Arch::Llama;
      auto m = Model::load(test::write_synthetic_hf_dir(s, test::temp_dir("syn") + "/hf", sharded));
      EXPECT_EQ(m->format(), "hf");
      expect_loaded(*m, s);
      EXPECT_EQ(m->weights().layers[1].wq.type, DType::BF16);
      // generation_config.json's eos ids are stop tokens too.
      const std::string eos = arch == Arch::Llama ? "<|end_of_text|>" : "<|endoftext|>";
      EXPECT_TRUE(m->is_stop(*m->tokenizer()->find_piece(eos))) << eos;
    }
}

TEST(SyntheticModel, GGUFTensorTypesAsRequested) {
  test::SyntheticSpec s;
  s.arch = Arch::Qwen2;
  s.weight_type = DType::Q4_0;
  s.embed_type = DType::Q8_0;
  auto path = test::write_synthetic_gguf(s, test::temp_dir("syn") + "/q.gguf");
  GGUFFile f(path);
  int matrices = 0;
  for (const auto& t : f.tensors()) {
    SCOPED_TRACE(t.name);
    if (t.name == "token_embd.weight" || t.name == "output.weight") {
      EXPECT_EQ(t.type, DType::Q8_0);
    } else if (t.shape.size() == 2) {
      EXPECT_EQ(t.type, DType::Q4_0);
      ++matrices;
    } else {
      EXPECT_EQ(t.type, DType::F32);  // norms and biases
    }
  }
  EXPECT_EQ(matrices, 7 * s.n_layers);
  EXPECT_NO_THROW(Model::load(path));
}

TEST(SyntheticModel, KQuantsNeedRowsOf256) {
  test::SyntheticSpec s;
  s.weight_type = DType::Q4_K;
  auto dir = test::temp_dir("syn");
  try {
    test::write_synthetic_gguf(s, dir + "/k.gguf");
    FAIL() << "no error for d_model 64";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("d_model"), std::string::npos) << e.what();
  }
  s.d_model = 256;
  s.d_ff = 512;
  s.embed_type = DType::Q6_K;
  GGUFFile f(test::write_synthetic_gguf(s, dir + "/k.gguf"));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, DType::Q4_K);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, DType::Q6_K);
  EXPECT_THROW(test::write_synthetic_hf_dir(s, dir + "/hf"), Error);  // not a safetensors type
}

TEST(SyntheticModel, AllFilesHoldTheSameValues) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2})
    for (DType type : {DType::F32, DType::F16, DType::BF16}) {
      SCOPED_TRACE(fmt::format("{} {}", arch == Arch::Llama ? "llama" : "qwen2", dtype_name(type)));
      test::SyntheticSpec s;
      s.arch = arch;
      s.weight_type = type;
      s.with_tokenizer = false;
      s.llama3_rope_scaling = arch == Arch::Llama;
      const auto dir = test::temp_dir("syn");
      HFModelFiles one = load_hf_model_dir(test::write_synthetic_hf_dir(s, dir + "/one"));
      HFModelFiles two = load_hf_model_dir(test::write_synthetic_hf_dir(s, dir + "/two", true));
      ASSERT_EQ(one.tensors.tensors.size(), two.tensors.tensors.size());
      for (const auto& [name, a] : one.tensors.tensors) {
        const TensorView* b = two.tensors.find(name);
        ASSERT_NE(b, nullptr) << name;
        ASSERT_EQ(a.nbytes, b->nbytes) << name;
        EXPECT_EQ(0, std::memcmp(a.data, b->data, a.nbytes)) << name;
      }
      EXPECT_EQ(one.config.rope_freq_factors, two.config.rope_freq_factors);

      // The GGUF file: matrices byte-identical to the (permuted) HF tensors;
      // norms and biases are F32 there but hold the same, HF-rounded values.
      GGUFFile g(test::write_synthetic_gguf(s, dir + "/m.gguf"));
      size_t compared = 0;
      for (const auto& t : g.tensors()) {
        if (t.name == "rope_freqs.weight") {
          EXPECT_EQ(to_floats(t), one.config.rope_freq_factors);
          continue;
        }
        const TensorView* h = one.tensors.find(t.name);
        ASSERT_NE(h, nullptr) << t.name;
        ASSERT_EQ(t.shape, h->shape) << t.name;
        if (t.type == h->type) {
          EXPECT_EQ(0, std::memcmp(t.data, h->data, t.nbytes)) << t.name;
        } else {
          EXPECT_EQ(to_floats(t), to_floats(*h)) << t.name;
        }
        ++compared;
      }
      EXPECT_EQ(compared, one.tensors.tensors.size());
    }
}

TEST(SyntheticModel, DeterministicBySeed) {
  test::SyntheticSpec s;
  s.weight_type = DType::Q8_0;
  const auto dir = test::temp_dir("syn");
  auto a = test::read_file(test::write_synthetic_gguf(s, dir + "/a.gguf"));
  auto b = test::read_file(test::write_synthetic_gguf(s, dir + "/b.gguf"));
  EXPECT_EQ(a, b);
  s.seed = 2;
  auto c = test::read_file(test::write_synthetic_gguf(s, dir + "/c.gguf"));
  EXPECT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST(SyntheticModel, WeightScales) {
  test::SyntheticSpec s;
  s.arch = Arch::Qwen2;
  s.with_tokenizer = false;
  GGUFFile f(test::write_synthetic_gguf(s, test::temp_dir("syn") + "/m.gguf"));
  auto range = [&](const char* name) {
    auto v = to_floats(*f.find_tensor(name));
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return std::pair{*lo, *hi};
  };
  // Norms 1 +- 0.1, biases +-0.1, embeddings +-1, matrices +-gain*sqrt(3/fan_in).
  auto [nlo, nhi] = range("blk.0.attn_norm.weight");
  EXPECT_GE(nlo, 0.9f);
  EXPECT_LE(nhi, 1.1f);
  EXPECT_LT(nhi - nlo, 0.2f);
  EXPECT_GT(nhi - nlo, 0.1f);  // 64 uniform draws span most of the range
  auto [blo, bhi] = range("blk.1.attn_v.bias");
  EXPECT_GE(blo, -0.1f);
  EXPECT_LE(bhi, 0.1f);
  auto [elo, ehi] = range("token_embd.weight");
  EXPECT_GE(elo, -1.0f);
  EXPECT_LT(ehi, 1.0f);
  EXPECT_GT(ehi - elo, 1.9f);
  const float a = std::sqrt(3.0f / s.d_ff);  // ffn_down has d_ff inputs
  auto [dlo, dhi] = range("blk.0.ffn_down.weight");
  EXPECT_GE(dlo, -a);
  EXPECT_LE(dhi, a);
  EXPECT_GT(dhi, 0.9f * a);
}

TEST(SyntheticModel, VocabularyIsTheSameInBothFormats) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2}) {
    test::SyntheticSpec s;
    s.arch = arch;
    const auto dir = test::temp_dir("syn");
    GGUFFile g(test::write_synthetic_gguf(s, dir + "/m.gguf"));
    test::write_synthetic_hf_dir(s, dir + "/hf");
    const json tj = json::parse(test::read_file(dir + "/hf/tokenizer.json"));

    auto tokens = g.get_string_array("tokenizer.ggml.tokens");
    auto types = g.get_int_array("tokenizer.ggml.token_type");
    auto merges = g.get_string_array("tokenizer.ggml.merges");
    ASSERT_EQ(tokens.size(), size_t(s.vocab_size));
    ASSERT_EQ(types.size(), tokens.size());
    EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(tokens[0], "\xC4\x80");   // byte 0 -> U+0100
    EXPECT_EQ(tokens[32], "\xC4\xA0");  // space -> U+0120 'Ġ'
    EXPECT_EQ(tokens['A'], "A");
    EXPECT_EQ(merges.size(), 64u);
    // Every merge yields a token of the vocabulary.
    for (const auto& m : merges) {
      auto sp = m.find(' ');
      ASSERT_NE(sp, std::string::npos) << m;
      std::string merged = m.substr(0, sp) + m.substr(sp + 1);
      EXPECT_NE(std::find(tokens.begin(), tokens.end(), merged), tokens.end()) << m;
    }
    EXPECT_EQ(merges, tj["model"]["merges"].get<std::vector<std::string>>());

    // The same id -> token map: model.vocab plus added_tokens cover every id once.
    std::vector<std::string> hf_tokens(s.vocab_size);
    for (const auto& [tok, id] : tj["model"]["vocab"].items()) hf_tokens.at(id.get<int>()) = tok;
    for (const auto& at : tj["added_tokens"]) {
      EXPECT_TRUE(at["special"].get<bool>());
      EXPECT_EQ(types.at(at["id"].get<int>()), 3) << at.dump();  // control in GGUF
      hf_tokens.at(at["id"].get<int>()) = at["content"].get<std::string>();
    }
    EXPECT_EQ(hf_tokens, tokens);
    const size_t n_special = arch == Arch::Llama ? 5 : 3;
    EXPECT_EQ(tj["added_tokens"].size(), n_special);
    EXPECT_EQ(std::count(types.begin(), types.end(), 3), int64_t(n_special));
    const auto n_unused = std::count(types.begin(), types.end(), 5);
    EXPECT_GT(n_unused, 0);
    EXPECT_EQ(tokens[s.vocab_size - n_special - 1], fmt::format("<unused_{}>", n_unused - 1));

    const json tc = json::parse(test::read_file(dir + "/hf/tokenizer_config.json"));
    EXPECT_EQ(tc["chat_template"], g.get_string("tokenizer.chat_template"));
    EXPECT_EQ(tc["eos_token"], tokens.at(g.get_int("tokenizer.ggml.eos_token_id")));
    EXPECT_EQ(tc["add_bos_token"], g.get_bool("tokenizer.ggml.add_bos_token"));
    EXPECT_EQ(g.get_string("tokenizer.ggml.pre"), arch == Arch::Llama ? "llama-bpe" : "qwen2");
    if (arch == Arch::Llama) {
      EXPECT_EQ(tokens.at(g.get_int("tokenizer.ggml.bos_token_id")), "<|begin_of_text|>");
      EXPECT_EQ(tokens.at(g.get_int("tokenizer.ggml.eot_token_id")), "<|eot_id|>");
    } else {
      EXPECT_EQ(tokens.at(g.get_int("tokenizer.ggml.eos_token_id")), "<|im_end|>");
    }
  }
}

TEST(SyntheticModel, BothFormatsTokenizeAlike) {
  for (Arch arch : {Arch::Llama, Arch::Qwen2}) {
    test::SyntheticSpec s;
    s.arch = arch;
    s.with_tokenizer = true;
    const auto dir = test::temp_dir("syn");
    auto g = Model::load(test::write_synthetic_gguf(s, dir + "/m.gguf"));
    auto h = Model::load(test::write_synthetic_hf_dir(s, dir + "/hf"));
    const std::string end = arch == Arch::Llama ? "<|eot_id|>" : "<|im_end|>";
    const std::string text = "The dog is in the house.\n    print(i) 12345" + end + " done";
    const bool bos = arch == Arch::Llama;  // as each format's add_bos_token says
    ASSERT_EQ(g->require_tokenizer().add_bos(), bos);
    ASSERT_EQ(h->require_tokenizer().add_bos(), bos);
    auto a = g->require_tokenizer().encode(text, bos, true);
    auto b = h->require_tokenizer().encode(text, bos, true);
    EXPECT_EQ(a, b);
    EXPECT_LT(a.size(), text.size() - end.size());  // the merges apply
    EXPECT_EQ(g->require_tokenizer().decode(a, true),
              (arch == Arch::Llama ? "<|begin_of_text|>" : "") + text);
    EXPECT_EQ(std::count(a.begin(), a.end(), s.vocab_size - 1), 1);  // the special token
  }
}

TEST(SyntheticModel, RejectsImpossibleSpecs) {
  const auto dir = test::temp_dir("syn");
  test::SyntheticSpec s;
  s.vocab_size = 200;  // fewer than the 256 byte tokens
  EXPECT_THROW(test::write_synthetic_gguf(s, dir + "/v.gguf"), Error);
  s = {};
  s.n_heads = 5;  // 64 does not split into 5 heads
  EXPECT_THROW(test::write_synthetic_gguf(s, dir + "/h.gguf"), Error);
  s = {};
  s.weight_type = DType::Q8_0;
  EXPECT_THROW(test::write_synthetic_hf_dir(s, dir + "/hf"), Error);
}
