#include "model/model_shape.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "core/error.h"
#include "io/gguf_writer.h"
#include "quant/quants.h"

namespace tandem {
namespace {

// The tensor types of one preset. Q4_K_M files give some layers' attn_v and
// ffn_down more bits; which layers, and which types, is read off the real files.
struct TypeRecipe {
  DType embed, output, matrix;  // output unused when the embedding is tied
  DType attn_v, ffn_down;       // in the other layers
  DType attn_v_more, ffn_down_more;
  std::vector<int> more_bits_layers = {};
};

ModelShape build(ModelShape s, bool tied, const TypeRecipe& r) {
  const int64_t d = s.d_model, ff = s.d_ff, V = s.vocab_size;
  const int64_t q_dim = int64_t{s.n_heads} * s.head_dim();
  const int64_t kv_dim = int64_t{s.n_kv_heads} * s.head_dim();
  auto add = [&](std::string name, DType t, std::vector<int64_t> shape) {
    s.tensors.push_back({std::move(name), t, std::move(shape)});
  };
  add("token_embd.weight", r.embed, {d, V});
  for (int i = 0; i < s.n_layers; ++i) {
    const bool more = std::count(r.more_bits_layers.begin(), r.more_bits_layers.end(), i) > 0;
    auto n = [&](const char* what) { return fmt::format("blk.{}.{}", i, what); };
    add(n("attn_norm.weight"), DType::F32, {d});
    add(n("attn_q.weight"), r.matrix, {d, q_dim});
    add(n("attn_k.weight"), r.matrix, {d, kv_dim});
    add(n("attn_v.weight"), more ? r.attn_v_more : r.attn_v, {d, kv_dim});
    if (s.arch == Arch::Qwen2) {
      add(n("attn_q.bias"), DType::F32, {q_dim});
      add(n("attn_k.bias"), DType::F32, {kv_dim});
      add(n("attn_v.bias"), DType::F32, {kv_dim});
    }
    add(n("attn_output.weight"), r.matrix, {q_dim, d});
    add(n("ffn_norm.weight"), DType::F32, {d});
    add(n("ffn_gate.weight"), r.matrix, {d, ff});
    add(n("ffn_up.weight"), r.matrix, {d, ff});
    add(n("ffn_down.weight"), more ? r.ffn_down_more : r.ffn_down, {ff, d});
  }
  add("output_norm.weight", DType::F32, {d});
  if (!tied) add("output.weight", r.output, {d, V});
  if (s.llama3_rope_scaling) add("rope_freqs.weight", DType::F32, {s.head_dim() / 2});
  return s;
}

ModelShape qwen25(const std::string& name, int layers, int d, int heads, int ff) {
  return {.name = name,
          .arch = Arch::Qwen2,
          .n_layers = layers,
          .d_model = d,
          .n_heads = heads,
          .n_kv_heads = 2,
          .d_ff = ff,
          .vocab_size = 151936,
          .context_length = 32768,
          .rope_theta = 1000000.0f,
          .norm_eps = 1e-6f};
}

ModelShape llama32(const std::string& name, int layers, int d, int heads) {
  return {.name = name,
          .arch = Arch::Llama,
          .n_layers = layers,
          .d_model = d,
          .n_heads = heads,
          .n_kv_heads = 8,
          .d_ff = 8192,
          .vocab_size = 128256,
          .context_length = 131072,
          .rope_theta = 500000.0f,
          .norm_eps = 1e-5f,
          .llama3_rope_scaling = true,
          .rope_factor = 32.0f};
}

// splitmix64: the same stream on every platform.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

float uniform(uint64_t& state) {  // in [-1, 1)
  state = mix(state);
  return static_cast<float>(state >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

enum class Kind { Matrix, Embedding, Norm, Bias };

Kind kind_of(const ShapeTensor& t) {
  if (t.shape.size() == 2) return t.name == "token_embd.weight" ? Kind::Embedding : Kind::Matrix;
  return t.name.find(".bias") != std::string::npos ? Kind::Bias : Kind::Norm;
}

// Distinct random rows of one (type, row length, kind), quantized once.
class RowPool {
 public:
  static constexpr int kRows = 64;

  const std::vector<uint8_t>& rows(DType t, int64_t n, Kind kind, uint64_t seed) {
    auto key = std::make_tuple(t, n, kind);
    auto it = pools_.find(key);
    if (it != pools_.end()) return it->second;
    const size_t row_bytes = dtype_row_bytes(t, n);
    std::vector<uint8_t> bytes(row_bytes * kRows);
    std::vector<float> row(n);
    // a = sqrt(3 / fan_in): unit-variance outputs for unit-variance inputs.
    const float a = kind == Kind::Matrix ? std::sqrt(3.0f / static_cast<float>(n)) : 1.0f;
    uint64_t state = mix(seed ^ (uint64_t(t) << 40) ^ uint64_t(n));
    for (int r = 0; r < kRows; ++r) {
      for (auto& x : row) x = a * uniform(state);
      quantize_row(t, row.data(), &bytes[r * row_bytes], n);
    }
    return pools_.emplace(key, std::move(bytes)).first->second;
  }

 private:
  std::map<std::tuple<DType, int64_t, Kind>, std::vector<uint8_t>> pools_;
};

// FNV-1a of a name: the same on every platform, unlike std::hash.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::vector<float> small_values(const ShapeTensor& t, uint64_t seed) {
  std::vector<float> v(t.shape[0]);
  uint64_t state = mix(seed ^ name_hash(t.name));
  const bool norm = kind_of(t) == Kind::Norm;
  for (auto& x : v) x = (norm ? 1.0f : 0.0f) + 0.1f * uniform(state);
  return v;
}

}  // namespace

uint64_t ModelShape::bytes() const {
  uint64_t total = 0;
  for (const auto& t : tensors) {
    int64_t rows = 1;
    for (size_t i = 1; i < t.shape.size(); ++i) rows *= t.shape[i];
    total += dtype_row_bytes(t.type, t.shape[0]) * uint64_t(rows);
  }
  return total;
}

std::vector<std::string> model_shape_names() {
  return {"qwen2.5-coder-1.5b-q4_k_m", "qwen2.5-coder-0.5b-q4_k_m", "llama-3.2-1b-bf16",
          "llama-3.2-3b-bf16"};
}

ModelShape model_shape(const std::string& name) {
  if (name == "qwen2.5-coder-1.5b-q4_k_m")
    return build(qwen25(name, 28, 1536, 12, 8960), false,
                 {.embed = DType::Q4_K,
                  .output = DType::Q6_K,
                  .matrix = DType::Q4_K,
                  .attn_v = DType::Q4_K,
                  .ffn_down = DType::Q4_K,
                  .attn_v_more = DType::Q6_K,
                  .ffn_down_more = DType::Q6_K,
                  .more_bits_layers = {0, 1, 5, 6, 7, 8, 9, 10, 13, 16, 19, 21, 24, 27}});
  if (name == "qwen2.5-coder-0.5b-q4_k_m")  // 896 is no multiple of 256: legacy types
    return build(qwen25(name, 24, 896, 14, 4864), false,
                 {.embed = DType::Q5_0,
                  .output = DType::Q8_0,
                  .matrix = DType::Q5_0,
                  .attn_v = DType::Q5_0,
                  .ffn_down = DType::Q4_K,
                  .attn_v_more = DType::Q8_0,
                  .ffn_down_more = DType::Q6_K,
                  .more_bits_layers = {0, 1, 3, 6, 7, 8, 9, 10, 13, 16, 19, 21}});
  const TypeRecipe bf16{.embed = DType::BF16,
                        .output = DType::BF16,
                        .matrix = DType::BF16,
                        .attn_v = DType::BF16,
                        .ffn_down = DType::BF16,
                        .attn_v_more = DType::BF16,
                        .ffn_down_more = DType::BF16};
  if (name == "llama-3.2-1b-bf16") return build(llama32(name, 16, 2048, 32), true, bf16);
  if (name == "llama-3.2-3b-bf16") return build(llama32(name, 28, 3072, 24), true, bf16);
  std::string known;
  for (const auto& n : model_shape_names()) known += (known.empty() ? "" : ", ") + n;
  fail("unknown model shape '{}' (known: {})", name, known);
}

void set_architecture_metadata(GGUFWriter& w, const ModelShape& s, const std::string& name) {
  const std::string a = s.arch == Arch::Llama ? "llama" : "qwen2";
  w.set_string("general.architecture", a);
  w.set_string("general.type", "model");
  w.set_string("general.name", name);
  w.set_u32(a + ".block_count", s.n_layers);
  w.set_u32(a + ".context_length", s.context_length);
  w.set_u32(a + ".embedding_length", s.d_model);
  w.set_u32(a + ".feed_forward_length", s.d_ff);
  w.set_u32(a + ".attention.head_count", s.n_heads);
  w.set_u32(a + ".attention.head_count_kv", s.n_kv_heads);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", s.norm_eps);
  w.set_f32(a + ".rope.freq_base", s.rope_theta);
  w.set_u32(a + ".rope.dimension_count", s.head_dim());
  w.set_u32(a + ".vocab_size", s.vocab_size);
}

void write_random_gguf(const ModelShape& s, const std::string& path, uint64_t seed) {
  GGUFWriter w;
  set_architecture_metadata(w, s, "random weights, the shape of " + s.name);

  RowPool pool;
  uint64_t tensor_seed = seed;
  for (const auto& t : s.tensors) {
    tensor_seed = mix(tensor_seed);
    if (t.name == "rope_freqs.weight") {
      ModelConfig c;
      c.head_dim = s.head_dim();
      c.rope_theta = s.rope_theta;
      c.rope_scaling.type = RopeScaling::Type::Llama3;
      c.rope_scaling.factor = s.rope_factor;
      c.rope_scaling.low_freq_factor = s.rope_low_freq;
      c.rope_scaling.high_freq_factor = s.rope_high_freq;
      c.rope_scaling.original_context_length = s.rope_original_context;
      w.add_tensor_f32(t.name, DType::F32, t.shape, llama3_rope_factors(c));
      continue;
    }
    const Kind kind = kind_of(t);
    if (kind == Kind::Norm || kind == Kind::Bias) {
      w.add_tensor_f32(t.name, t.type, t.shape, small_values(t, tensor_seed));
      continue;
    }
    const std::vector<uint8_t>& rows = pool.rows(t.type, t.shape[0], kind, seed);
    const size_t row_bytes = dtype_row_bytes(t.type, t.shape[0]);
    std::vector<uint8_t> data(row_bytes * size_t(t.shape[1]));
    for (int64_t r = 0; r < t.shape[1]; ++r) {
      const uint64_t pick = mix(tensor_seed ^ uint64_t(r)) % RowPool::kRows;
      std::memcpy(&data[size_t(r) * row_bytes], &rows[pick * row_bytes], row_bytes);
    }
    w.add_tensor(t.name, t.type, t.shape, std::move(data));
  }
  w.write(path);
}

}  // namespace tandem
