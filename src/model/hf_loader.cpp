#include "model/hf_loader.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_text.h"
#include "io/safetensors.h"

namespace fs = std::filesystem;

namespace tandem {
namespace {

using json = nlohmann::json;

const char* kConfig = "config.json";
const char* kSingleWeights = "model.safetensors";
const char* kShardIndex = "model.safetensors.index.json";

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("{}: cannot open", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("{}: read failed", p.string());
  return ss.str();
}

json read_json(const fs::path& p) { return parse_json(read_text(p), p.string()); }

// Per-layer tensors: Hugging Face suffix -> GGUF suffix.
const std::map<std::string, std::string>& layer_names() {
  static const std::map<std::string, std::string> m = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  return m;
}

// All tensors of the checkpoint by Hugging Face name: model.safetensors, or the
// shards model.safetensors.index.json lists (each opened once).
using Sources = std::map<std::string, std::shared_ptr<SafetensorsFile>>;

Sources open_weights(const fs::path& dir) {
  Sources out;
  if (fs::exists(dir / kSingleWeights)) {
    auto f = std::make_shared<SafetensorsFile>((dir / kSingleWeights).string());
    for (const auto& t : f->tensors()) out[t.name] = f;
    for (const auto& [name, dtype] : f->unsupported()) out[name] = f;
    return out;
  }
  const fs::path index_path = dir / kShardIndex;
  json index = read_json(index_path);
  const std::string ip = index_path.string();
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail("{}: missing or invalid 'weight_map' object", ip);
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
  for (const auto& [name, shard_json] : index["weight_map"].items()) {
    if (!shard_json.is_string())
      fail("{}: weight_map['{}'] must be a file name, got {}", ip, name, json_excerpt(shard_json));
    const std::string shard = shard_json.get<std::string>();
    // Shards live beside the index: no directories, no escaping the model dir.
    if (shard.empty() || fs::path(shard).filename() != shard)
      fail("{}: weight_map['{}'] names an invalid shard file '{}'", ip, name, shard);
    auto& f = shards[shard];
    if (!f) {
      const fs::path sp = dir / shard;
      if (!fs::exists(sp))
        fail("{}: shard '{}' (listed for tensor '{}') does not exist", ip, shard, name);
      f = std::make_shared<SafetensorsFile>(sp.string());
    }
    if (!f->find(name) && !f->unsupported_dtype(name))
      fail("{}: tensor '{}' is listed in {} but absent from this shard", f->path(), name,
           kShardIndex);
    out[name] = f;
  }
  return out;
}

// Reorders the rows of a llama q/k weight (or bias: one value per row) into
// GGUF's layout, in a buffer the tensor set keeps alive. A tensor whose shape
// does not fit the config is left alone: bind_weights reports it.
void permute_qk(TensorView& t, int n_head, const ModelConfig& c, TensorSet& ts) {
  const int64_t rows = int64_t{n_head} * c.head_dim;
  const bool is_bias = t.shape.size() == 1;
  if (is_bias ? t.ne(0) != rows : (t.shape.size() != 2 || t.ne(1) != rows)) return;
  const size_t row_bytes = is_bias ? dtype_row_bytes(t.type, 1) : t.row_bytes();
  auto buf = std::make_shared<std::vector<uint8_t>>(
      permute_llama_qk_rows(t.data, rows, row_bytes, n_head));
  t.data = buf->data();
  ts.keep_alive.push_back(buf);
}

// Older safetensors writers did not pad the header, so a tensor can start at an
// address that is not a multiple of its element size; kernels read floats in
// place, so such a tensor gets an aligned copy the tensor set keeps alive.
void align_data(TensorView& t, TensorSet& ts) {
  const size_t elem = dtype_row_bytes(t.type, 1);
  if (reinterpret_cast<uintptr_t>(t.data) % elem == 0) return;
  auto buf = std::make_shared<std::vector<uint8_t>>(t.data, t.data + t.nbytes);
  t.data = buf->data();
  ts.keep_alive.push_back(buf);
}

// An int or a list of ints (eos_token_id may be either); nullopt when absent.
std::optional<std::vector<int>> read_ids(const json& j, const char* key, const fs::path& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  std::vector<int> ids;
  auto add = [&](const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 30))
      fail("{}: field '{}' must be a token id or a list of token ids, got {}", file.string(), key,
           json_excerpt(*it));
    ids.push_back(v.get<int>());
  };
  if (it->is_array()) {
    for (const auto& v : *it) add(v);
  } else {
    add(*it);
  }
  return ids;
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template}
// of which tandem uses "default". Newer checkpoints put it in chat_template.jinja.
std::string read_chat_template(const fs::path& dir) {
  const fs::path tc = dir / "tokenizer_config.json";
  if (fs::exists(tc)) {
    json j = read_json(tc);
    auto it = j.is_object() ? j.find("chat_template") : j.end();
    if (it != j.end() && !it->is_null()) {
      if (it->is_string()) return it->get<std::string>();
      if (!it->is_array())
        fail("{}: field 'chat_template' must be a string or a list, got a {}", tc.string(),
             it->type_name());
      for (const auto& e : *it) {
        if (!e.is_object() || !e.contains("name") || !e.contains("template") ||
            !e["template"].is_string())
          fail("{}: field 'chat_template' entries must be {{\"name\", \"template\"}} objects",
               tc.string());
        if (e["name"] == "default") return e["template"].get<std::string>();
      }
      return "";  // named templates only (tool use, RAG): none is the chat default
    }
  }
  if (fs::exists(dir / "chat_template.jinja")) return read_text(dir / "chat_template.jinja");
  return "";
}

std::string dir_name(const fs::path& dir) {
  fs::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

}  // namespace

std::optional<std::string> hf_to_gguf_tensor_name(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t i = prefix.size(), j = i;
  while (j < hf.size() && j - i < 6 && hf[j] >= '0' && hf[j] <= '9') ++j;
  if (j == i || j >= hf.size() || hf[j] != '.') return std::nullopt;
  auto it = layer_names().find(hf.substr(j + 1));
  if (it == layer_names().end()) return std::nullopt;
  return fmt::format("blk.{}.{}", std::stoi(hf.substr(i, j - i)), it->second);
}

std::vector<int64_t> llama_qk_row_order(int64_t rows, int n_head) {
  check(n_head > 0 && rows % (2 * int64_t{n_head}) == 0,
        "q/k permutation: {} rows do not split into {} heads of an even size", rows, n_head);
  // numpy: w.reshape(n_head, 2, d/2, cols).swapaxes(1, 2).reshape(rows, cols)
  const int64_t d = rows / n_head, half = d / 2;
  std::vector<int64_t> order(rows);
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) order[h * d + 2 * i + j] = h * d + j * half + i;
  return order;
}

std::vector<uint8_t> permute_llama_qk_rows(const uint8_t* data, int64_t rows, size_t row_bytes,
                                           int n_head) {
  auto order = llama_qk_row_order(rows, n_head);
  std::vector<uint8_t> out(static_cast<size_t>(rows) * row_bytes);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + r * row_bytes, data + order[r] * row_bytes, row_bytes);
  return out;
}

bool is_hf_model_dir(const std::string& path) {
  const fs::path d(path);
  std::error_code ec;
  return fs::is_directory(d, ec) && fs::exists(d / kConfig, ec) &&
         (fs::exists(d / kSingleWeights, ec) || fs::exists(d / kShardIndex, ec));
}

HFModelFiles load_hf_model_dir(const std::string& dir_str) {
  const fs::path dir(dir_str);
  const fs::path config_path = dir / kConfig;
  if (!fs::exists(config_path))
    fail("{}: missing (not a Hugging Face model directory)", config_path.string());
  const json cj = read_json(config_path);
  HFModelFiles out;
  ModelConfig& c = out.config;
  c = config_from_hf_json(cj, config_path.string());
  c.name = dir_name(dir);
  if (!fs::exists(dir / kSingleWeights) && !fs::exists(dir / kShardIndex))
    fail("{}: no {} or {}", dir_str, kSingleWeights, kShardIndex);

  auto sources = open_weights(dir);
  // No lm_head in the checkpoint means the embeddings double as the LM head,
  // whatever tie_word_embeddings says.
  if (!sources.count("lm_head.weight")) c.tied_embeddings = true;

  TensorSet& ts = out.tensors;
  ts.source = dir_str;
  std::set<const SafetensorsFile*> kept;  // files already in keep_alive
  for (const auto& [hf_name, file] : sources) {
    // rotary_emb.inv_freq (recomputed from the config) and anything else tandem
    // does not know, e.g. vision towers of multimodal checkpoints, are ignored.
    auto name = hf_to_gguf_tensor_name(hf_name);
    if (!name) continue;
    const bool is_bias = name->size() > 5 && name->compare(name->size() - 5, 5, ".bias") == 0;
    if ((*name == "output.weight" && c.tied_embeddings) || (is_bias && !c.qkv_bias)) continue;
    if (auto dt = file->unsupported_dtype(hf_name))
      fail("{}: tensor '{}' has dtype {}, which tandem cannot use (F32, F16 or BF16 only)",
           file->path(), hf_name, *dt);
    TensorView t = *file->find(hf_name);
    t.name = *name;
    if (c.arch == Arch::Llama) {
      const bool is_q = name->find(".attn_q.") != std::string::npos;
      const bool is_k = name->find(".attn_k.") != std::string::npos;
      if (is_q || is_k) permute_qk(t, is_q ? c.n_heads : c.n_kv_heads, c, ts);
    }
    align_data(t, ts);
    if (kept.insert(file.get()).second) ts.keep_alive.push_back(file);
    ts.tensors[*name] = std::move(t);
  }
  // With q/k in GGUF's interleaved layout, llama uses the same rotation as GGUF.
  if (c.arch == Arch::Llama) c.rope_style = kernels::RopeStyle::Normal;

  if (fs::exists(dir / "tokenizer.json"))
    out.tokenizer_json_path = (dir / "tokenizer.json").string();
  out.chat_template = read_chat_template(dir);

  // eos / bos: generation_config.json first, then config.json.
  const fs::path gc_path = dir / "generation_config.json";
  json gc = fs::exists(gc_path) ? read_json(gc_path) : json::object();
  if (!gc.is_object()) fail("{}: not a JSON object", gc_path.string());
  auto eos = read_ids(gc, "eos_token_id", gc_path);
  if (!eos) eos = read_ids(cj, "eos_token_id", config_path);
  out.eos_token_ids = eos.value_or(std::vector<int>{});
  auto bos = read_ids(gc, "bos_token_id", gc_path);
  if (!bos) bos = read_ids(cj, "bos_token_id", config_path);
  if (bos && !bos->empty()) out.bos_token_id = bos->front();
  return out;
}

}  // namespace tandem
