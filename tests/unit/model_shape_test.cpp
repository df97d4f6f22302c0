// The real models' shapes (model/model_shape.h): each preset's tensor table is
// the real GGUF's (names, types, sizes) where `make models` fetched it; a random
// model written from a preset loads with the preset's configuration and gives
// finite logits; the writer is deterministic in its seed; bad names are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/prompt_logits.h"
#include "io/gguf_reader.h"
#include "model/model.h"
#include "model/model_shape.h"
#include "support/paths.h"
#include "support/test_util.h"

using namespace tandem;

namespace {

using Row = std::tuple<std::string, DType, std::vector<int64_t>>;

std::set<Row> table(const ModelShape& s) {
  std::set<Row> rows;
  for (const auto& t : s.tensors) rows.insert({t.name, t.type, t.shape});
  return rows;
}

std::set<Row> table(const GGUFFile& f) {
  std::set<Row> rows;
  for (const auto& t : f.tensors()) rows.insert({t.name, t.type, t.shape});
  return rows;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

// The Qwen2.5-Coder presets against the files `make models` fetches: the same
// tensors, types and shapes, and the same dimensions.
TEST(ModelShape, QwenPresetsAreTheRealFilesTables) {
  const std::pair<const char*, const char*> pairs[] = {
      {"qwen2.5-coder-1.5b-q4_k_m", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"},
      {"qwen2.5-coder-0.5b-q4_k_m", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"}};
  for (const auto& [preset, file] : pairs) {
    const ModelShape s = model_shape(preset);
    GGUFFile real(test::cached_model(file));
    EXPECT_EQ(table(s), table(real)) << preset;
    uint64_t real_bytes = 0;
    for (const auto& t : real.tensors()) real_bytes += t.nbytes;
    EXPECT_EQ(s.bytes(), real_bytes) << preset;
    const ModelConfig c = Model::load(test::cached_model(file))->config();
    EXPECT_EQ(s.n_layers, c.n_layers);
    EXPECT_EQ(s.d_model, c.d_model);
    EXPECT_EQ(s.n_heads, c.n_heads);
    EXPECT_EQ(s.n_kv_heads, c.n_kv_heads);
    EXPECT_EQ(s.d_ff, c.d_ff);
    EXPECT_EQ(s.vocab_size, c.vocab_size);
    EXPECT_EQ(s.rope_theta, c.rope_theta);
    EXPECT_FLOAT_EQ(s.norm_eps, c.norm_eps);
  }
}

// Llama 3.2's published dimensions (config.json of Llama-3.2-1B and -3B): the
// files cannot be fetched here, so the table is checked for its arithmetic.
TEST(ModelShape, LlamaPresetsHaveThePublishedSizes) {
  const ModelShape one = model_shape("llama-3.2-1b-bf16");
  const ModelShape three = model_shape("llama-3.2-3b-bf16");
  EXPECT_EQ(one.head_dim(), 64);
  EXPECT_EQ(three.head_dim(), 128);
  // Parameters (tied embedding): 1.24 B and 3.21 B, two bytes each, plus the
  // F32 norms and rope factors.
  EXPECT_NEAR(one.bytes() / 2e9, 1.236, 0.001);
  EXPECT_NEAR(three.bytes() / 2e9, 3.213, 0.001);
  for (const auto& t : three.tensors) {
    if (t.shape.size() == 2) {
      EXPECT_EQ(t.type, DType::BF16) << t.name;
    }
  }
  EXPECT_EQ(std::count_if(three.tensors.begin(), three.tensors.end(),
                          [](const ShapeTensor& t) { return t.name == "output.weight"; }),
            0);  // tied
}

TEST(ModelShape, UnknownNamesAreRefusedWithTheKnownOnes) {
  try {
    model_shape("llama-9b");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'llama-9b'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("llama-3.2-1b-bf16"), std::string::npos) << e.what();
  }
}

// The smallest preset written with random weights: it loads with the preset's
// configuration, its logits are finite and not all equal, and the same seed
// writes the same bytes while another seed does not.
TEST(ModelShape, RandomModelLoadsAndRunsAndFollowsItsSeed) {
  const ModelShape s = model_shape("qwen2.5-coder-0.5b-q4_k_m");
  const std::string dir = test::temp_dir("model_shape");
  const std::string a = dir + "/a.gguf", b = dir + "/b.gguf", c = dir + "/c.gguf";
  write_random_gguf(s, a, 7);
  {
    auto m = Model::load(a);
    EXPECT_EQ(m->config().n_layers, s.n_layers);
    EXPECT_EQ(m->config().vocab_size, s.vocab_size);
    EXPECT_EQ(table(GGUFFile(a)), table(s));
    ThreadPool pool(2);
    const std::vector<int> ids = {1, 200, 3000, 40000};
    const std::vector<float> logits = prompt_logits(*m, pool, ids, DType::F16);
    ASSERT_EQ(logits.size(), ids.size() * size_t(s.vocab_size));
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
    const auto [lo, hi] = std::minmax_element(logits.begin(), logits.end());
    EXPECT_LT(*lo, *hi);
  }
  write_random_gguf(s, b, 7);
  EXPECT_TRUE(read_bytes(a) == read_bytes(b)) << "the same seed wrote different files";
  std::filesystem::remove(b);
  write_random_gguf(s, c, 8);
  EXPECT_FALSE(read_bytes(a) == read_bytes(c)) << "another seed wrote the same file";
  std::filesystem::remove_all(dir);
}
