#include "model/config.h"

#include <cmath>

#include "core/error.h"
#include "io/gguf_reader.h"

namespace tandem {

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](int v, const char* field) {
    check(v > 0, "{}: {} must be positive, got {}", source, field, v);
  };
  positive(n_layers, "block count");
  positive(d_model, "embedding length");
  positive(n_heads, "head count");
  positive(n_kv_heads, "kv head count");
  positive(head_dim, "head dimension");
  positive(d_ff, "feed-forward length");
  positive(vocab_size, "vocabulary size");
  positive(context_length, "context length");
  check(n_heads % n_kv_heads == 0, "{}: head count {} is not a multiple of kv head count {}",
        source, n_heads, n_kv_heads);
  check(head_dim % 2 == 0, "{}: head dimension {} must be even for RoPE", source, head_dim);
  check(norm_eps > 0 && std::isfinite(norm_eps), "{}: invalid rms norm epsilon {}", source,
        norm_eps);
  check(rope_theta > 0 && std::isfinite(rope_theta), "{}: invalid rope theta {}", source,
        rope_theta);
  check(rope_freq_factors.empty() || static_cast<int>(rope_freq_factors.size()) == head_dim / 2,
        "{}: rope_freqs has {} entries, expected head_dim/2 = {}", source,
        rope_freq_factors.size(), head_dim / 2);
}

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
  c.n_layers = static_cast<int>(f.get_int(a + "block_count"));
  c.d_model = static_cast<int>(f.get_int(a + "embedding_length"));
  c.d_ff = static_cast<int>(f.get_int(a + "feed_forward_length"));
  c.n_heads = static_cast<int>(f.get_int(a + "attention.head_count"));
  c.n_kv_heads = static_cast<int>(f.opt_int(a + "attention.head_count_kv").value_or(c.n_heads));
  c.head_dim = c.n_heads > 0 ? c.d_model / c.n_heads : 0;
  if (auto kl = f.opt_int(a + "attention.key_length")) c.head_dim = static_cast<int>(*kl);
  c.context_length = static_cast<int>(f.get_int(a + "context_length"));
  c.norm_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon"));
  c.rope_theta = static_cast<float>(f.opt_float(a + "rope.freq_base").value_or(10000.0));
  if (auto rd = f.opt_int(a + "rope.dimension_count"))
    check(*rd == c.head_dim, "{}: rope.dimension_count {} differs from head dimension {} "
          "(partial rotary embeddings are not supported)", f.path(), *rd, c.head_dim);
  if (auto v = f.opt_int(a + "vocab_size")) {
    c.vocab_size = static_cast<int>(*v);
  } else if (f.has("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<int>(f.find("tokenizer.ggml.tokens")->array.size());
  } else if (auto* t = f.find_tensor("token_embd.weight")) {
    c.vocab_size = static_cast<int>(t->ne(1));
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
    const float* p = reinterpret_cast<const float*>(rf->data);
    c.rope_freq_factors.assign(p, p + rf->numel());
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
