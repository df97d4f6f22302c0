// config.json of a Hugging Face Llama or Qwen2 checkpoint -> ModelConfig.
// Optional fields take the defaults of transformers' LlamaConfig / Qwen2Config.
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_text.h"
#include "model/config.h"

namespace tandem {
namespace {

using json = nlohmann::json;

// Typed access to the fields of one JSON object; every error names the file and
// the field. A null value counts as absent (config.json writes "rope_scaling": null).
class Fields {
 public:
  Fields(const json& j, const std::string& source, std::string prefix = "")
      : j_(j), source_(source), prefix_(std::move(prefix)) {}

  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<int> opt_int(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer())
      fail("{}: field '{}{}' must be an integer, got {}", source_, prefix_, key, json_excerpt(*v));
    int64_t i = v->get<int64_t>();
    if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max())
      fail("{}: field '{}{}' = {} is out of range", source_, prefix_, key, i);
    return static_cast<int>(i);
  }
  int req_int(const char* key) const {
    if (auto v = opt_int(key)) return *v;
    missing(key);
  }

  std::optional<double> opt_number(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number())
      fail("{}: field '{}{}' must be a number, got {}", source_, prefix_, key, json_excerpt(*v));
    return v->get<double>();
  }
  double req_number(const char* key) const {
    if (auto v = opt_number(key)) return *v;
    missing(key);
  }

  std::optional<bool> opt_bool(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean())
      fail("{}: field '{}{}' must be true or false, got {}", source_, prefix_, key,
           json_excerpt(*v));
    return v->get<bool>();
  }

  std::optional<std::string> opt_string(const char* key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string())
      fail("{}: field '{}{}' must be a string, got {}", source_, prefix_, key, json_excerpt(*v));
    return v->get<std::string>();
  }

  [[noreturn]] void missing(const char* key) const {
    fail("{}: missing required field '{}{}'", source_, prefix_, key);
  }

 private:
  const json& j_;
  const std::string& source_;
  std::string prefix_;
};

// The architecture from "architectures" (first entry) or else "model_type".
void read_arch(const Fields& f, const std::string& source, ModelConfig& c) {
  if (const json* archs = f.find("architectures")) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string())
      fail("{}: field 'architectures' must be a non-empty list of strings, got {}", source,
           json_excerpt(*archs));
    const std::string a = (*archs)[0].get<std::string>();
    if (a == "LlamaForCausalLM") {
      c.arch_name = "llama";
    } else if (a == "Qwen2ForCausalLM") {
      c.arch_name = "qwen2";
    } else {
      fail(
          "{}: unsupported architecture '{}' in field 'architectures' (supported: "
          "LlamaForCausalLM, Qwen2ForCausalLM)",
          source, a);
    }
  } else if (auto mt = f.opt_string("model_type")) {
    if (*mt != "llama" && *mt != "qwen2")
      fail("{}: unsupported model_type '{}' (supported: llama, qwen2)", source, *mt);
    c.arch_name = *mt;
  } else {
    fail("{}: missing required field 'architectures' (or 'model_type')", source);
  }
  c.arch = c.arch_name == "llama" ? Arch::Llama : Arch::Qwen2;
}

void read_rope_scaling(const Fields& f, const std::string& source, ModelConfig& c) {
  const json* rs = f.find("rope_scaling");
  if (!rs) return;
  if (!rs->is_object())
    fail("{}: field 'rope_scaling' must be an object or null, got {}", source, json_excerpt(*rs));
  Fields s(*rs, source, "rope_scaling.");
  // Newer configs say "rope_type", older ones "type".
  std::optional<std::string> type = s.opt_string("rope_type");
  if (!type) type = s.opt_string("type");
  if (!type) s.missing("rope_type");
  auto& r = c.rope_scaling;
  if (*type == "default") {
    r.type = RopeScaling::Type::None;
  } else if (*type == "linear") {
    r.type = RopeScaling::Type::Linear;
    r.factor = static_cast<float>(s.req_number("factor"));
  } else if (*type == "llama3") {
    r.type = RopeScaling::Type::Llama3;
    r.factor = static_cast<float>(s.req_number("factor"));
    r.low_freq_factor = static_cast<float>(s.req_number("low_freq_factor"));
    r.high_freq_factor = static_cast<float>(s.req_number("high_freq_factor"));
    r.original_context_length = s.req_int("original_max_position_embeddings");
    check(r.factor > 0 && r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor &&
              r.original_context_length > 0,
          "{}: invalid llama3 rope_scaling {}", source, json_excerpt(*rs));
  } else {
    fail("{}: unsupported rope_scaling type '{}' (supported: linear, llama3)", source, *type);
  }
  if (r.type == RopeScaling::Type::Linear)
    check(r.factor > 0, "{}: invalid rope_scaling.factor {}", source, r.factor);
}

}  // namespace

ModelConfig config_from_hf_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: config is not a JSON object", source);
  Fields f(j, source);
  ModelConfig c;
  read_arch(f, source, c);
  // Hugging Face checkpoints keep q/k in the rotate-half layout; the loader
  // switches llama to Normal after permuting q/k (see hf_loader.h).
  c.rope_style = kernels::RopeStyle::NeoX;

  c.d_model = f.req_int("hidden_size");
  c.d_ff = f.req_int("intermediate_size");
  c.n_layers = f.req_int("num_hidden_layers");
  c.n_heads = f.req_int("num_attention_heads");
  c.vocab_size = f.req_int("vocab_size");
  c.n_kv_heads = f.opt_int("num_key_value_heads").value_or(c.n_heads);
  c.head_dim = f.opt_int("head_dim").value_or(c.n_heads > 0 ? c.d_model / c.n_heads : 0);
  c.context_length =
      f.opt_int("max_position_embeddings").value_or(c.arch == Arch::Llama ? 2048 : 32768);
  c.norm_eps = static_cast<float>(f.opt_number("rms_norm_eps").value_or(1e-6));
  c.rope_theta = static_cast<float>(f.opt_number("rope_theta").value_or(10000.0));
  c.tied_embeddings = f.opt_bool("tie_word_embeddings").value_or(false);
  c.qkv_bias = c.arch == Arch::Qwen2 || f.opt_bool("attention_bias").value_or(false);

  // Variants the forward pass does not implement: refuse rather than compute
  // something else.
  if (auto act = f.opt_string("hidden_act"); act && *act != "silu")
    fail("{}: unsupported hidden_act '{}' (only silu)", source, *act);
  if (f.opt_bool("mlp_bias").value_or(false)) fail("{}: mlp_bias true is not supported", source);
  if (f.opt_bool("use_sliding_window").value_or(false))
    fail("{}: use_sliding_window true is not supported", source);

  read_rope_scaling(f, source, c);
  c.validate(source);  // before sizing anything by head_dim
  if (c.rope_scaling.type == RopeScaling::Type::Llama3) {
    c.rope_freq_factors = llama3_rope_factors(c);
    c.validate(source);
  }
  return c;
}

}  // namespace tandem
