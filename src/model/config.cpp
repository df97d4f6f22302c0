#include "model/config.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "core/error.h"
#include "io/gguf_reader.h"

namespace tandem {

void ModelConfig::validate(const std::string& source) const {
  // The upper bounds are far above any Llama-family model and keep products of
  // sizes (d_model * vocab, n_heads * head_dim, buffers per position) in range.
  auto in_range = [&](int v, int max, const char* field) {
    check(v > 0, "{}: {} must be positive, got {}", source, field, v);
    check(v <= max, "{}: {} = {} is implausibly large (limit {})", source, field, v, max);
  };
  in_range(n_layers, 1 << 12, "block count");
  in_range(d_model, 1 << 17, "embedding length");
  in_range(n_heads, 1 << 12, "head count");
  in_range(n_kv_heads, 1 << 12, "kv head count");
  in_range(head_dim, 1 << 12, "head dimension");
  in_range(d_ff, 1 << 20, "feed-forward length");
  in_range(vocab_size, 1 << 24, "vocabulary size");
  in_range(context_length, 1 << 24, "context length");
  check(n_heads % n_kv_heads == 0, "{}: head count {} is not a multiple of kv head count {}",
        source, n_heads, n_kv_heads);
  check(head_dim % 2 == 0, "{}: head dimension {} must be even for RoPE", source, head_dim);
  check(norm_eps > 0 && std::isfinite(norm_eps), "{}: invalid rms norm epsilon {}", source,
        norm_eps);
  check(rope_theta > 0 && std::isfinite(rope_theta), "{}: invalid rope theta {}", source,
        rope_theta);
  check(rope_freq_factors.empty() || static_cast<int>(rope_freq_factors.size()) == head_dim / 2,
        "{}: rope_freqs has {} entries, expected head_dim/2 = {}", source, rope_freq_factors.size(),
        head_dim / 2);
}

namespace {

// A metadata integer that must fit an int (sizes, counts): a larger value is an
// error naming the key, not a truncated number.
int int_field(const GGUFFile& f, const std::string& key, int64_t value) {
  check(value >= std::numeric_limits<int>::min() && value <= std::numeric_limits<int>::max(),
        "{}: metadata '{}' = {} is out of range", f.path(), key, value);
  return static_cast<int>(value);
}
int get_int_field(const GGUFFile& f, const std::string& key) {
  return int_field(f, key, f.get_int(key));
}
std::optional<int> opt_int_field(const GGUFFile& f, const std::string& key) {
  if (auto v = f.opt_int(key)) return int_field(f, key, *v);
  return std::nullopt;
}

}  // namespace

ModelConfig config_from_gguf(const GGUFFile& f) {
  ModelConfig c;
  c.arch_name = f.get_string("general.architecture");
  if (c.arch_name == "llama") {
    c.arch = Arch::Llama;
    c.rope_style = kernels::RopeStyle::Normal;
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::Qwen2;
    c.rope_style = kernels::RopeStyle::NeoX;
    c.qkv_bias = true;
  } else {
    fail("{}: unsupported architecture '{}' (supported: llama, qwen2)", f.path(), c.arch_name);
  }
  const std::string a = c.arch_name + ".";
  c.name = f.opt_string("general.name").value_or("");
  c.n_layers = get_int_field(f, a + "block_count");
  c.d_model = get_int_field(f, a + "embedding_length");
  c.d_ff = get_int_field(f, a + "feed_forward_length");
  c.n_heads = get_int_field(f, a + "attention.head_count");
  c.n_kv_heads = opt_int_field(f, a + "attention.head_count_kv").value_or(c.n_heads);
  c.head_dim = c.n_heads > 0 ? c.d_model / c.n_heads : 0;
  if (auto kl = opt_int_field(f, a + "attention.key_length")) c.head_dim = *kl;
  c.context_length = get_int_field(f, a + "context_length");
  c.norm_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon"));
  c.rope_theta = static_cast<float>(f.opt_float(a + "rope.freq_base").value_or(10000.0));
  if (auto rd = f.opt_int(a + "rope.dimension_count"))
    check(*rd == c.head_dim,
          "{}: rope.dimension_count {} differs from head dimension {} "
          "(partial rotary embeddings are not supported)",
          f.path(), *rd, c.head_dim);
  if (auto v = opt_int_field(f, a + "vocab_size")) {
    c.vocab_size = *v;
  } else if (f.has("tokenizer.ggml.tokens")) {
    c.vocab_size = int_field(f, "tokenizer.ggml.tokens",
                             static_cast<int64_t>(f.find("tokenizer.ggml.tokens")->array.size()));
  } else if (auto* t = f.find_tensor("token_embd.weight")) {
    c.vocab_size = int_field(f, "token_embd.weight", t->ne(1));
  }
  if (auto st = f.opt_string(a + "rope.scaling.type")) {
    if (*st == "linear") {
      c.rope_scaling.type = RopeScaling::Type::Linear;
      c.rope_scaling.factor = static_cast<float>(f.get_float(a + "rope.scaling.factor"));
    } else if (*st != "none") {
      fail("{}: unsupported rope scaling type '{}'", f.path(), *st);
    }
  }
  if (auto* rf = f.find_tensor("rope_freqs.weight")) {
    check(rf->type == DType::F32, "{}: rope_freqs.weight must be F32, is {}", f.path(),
          dtype_name(rf->type));
    check(rf->numel() <= 1 << 16, "{}: rope_freqs.weight has {} elements", f.path(), rf->numel());
    // memcpy: GGUF's alignment may be as small as 1, too small for a float load.
    c.rope_freq_factors.resize(static_cast<size_t>(rf->numel()));
    std::memcpy(c.rope_freq_factors.data(), rf->data, rf->nbytes);
  }
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  c.validate(f.path());
  return c;
}

std::vector<float> llama3_rope_factors(const ModelConfig& c) {
  // Llama 3.1 scaling as a divisor per frequency: keep high frequencies, divide
  // low ones by `factor`, blend in between. GGUF files carry these divisors as the
  // rope_freqs.weight tensor; computing the same float32 divisors from config.json
  // makes both sources run identical arithmetic.
  const auto& rs = c.rope_scaling;
  const double pi = 3.14159265358979323846;
  const double low_wavelen = rs.original_context_length / rs.low_freq_factor;
  const double high_wavelen = rs.original_context_length / rs.high_freq_factor;
  std::vector<float> factors(c.head_dim / 2);
  for (int i = 0; i < c.head_dim / 2; ++i) {
    double f = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.head_dim);
    double wavelen = 2 * pi / f;
    double div = 1.0;
    if (wavelen > low_wavelen) {
      div = rs.factor;
    } else if (wavelen >= high_wavelen) {
      double smooth = (rs.original_context_length / wavelen - rs.low_freq_factor) /
                      (rs.high_freq_factor - rs.low_freq_factor);
      div = 1.0 / ((1 - smooth) / rs.factor + smooth);
    }
    factors[i] = static_cast<float>(div);
  }
  return factors;
}

std::vector<float> rope_inv_freq(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    double f = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.head_dim);
    if (c.rope_scaling.type == RopeScaling::Type::Linear) f /= c.rope_scaling.factor;
    if (!c.rope_freq_factors.empty()) f /= c.rope_freq_factors[i];
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

}  // namespace tandem
