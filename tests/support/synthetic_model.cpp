#include "support/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "model/model_shape.h"
#include "quant/quants.h"

namespace fs = std::filesystem;

namespace tandem::test {
namespace {

using ojson = nlohmann::ordered_json;

// splitmix64: a tiny generator whose output is fixed by its definition, unlike
// std:: distributions, which differ between standard libraries.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1): 24 random bits, exact in float.
  float uniform() { return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }

 private:
  uint64_t state_;
};

enum class Kind { Embedding, Matrix, Norm, Bias };

// One weight tensor with its name in both formats, in the Hugging Face layout
// (llama q/k unpermuted). shape in GGML order: {inputs, outputs} for matrices.
struct WeightTensor {
  std::string hf_name, gguf_name;
  Kind kind;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

int head_dim(const SyntheticSpec& s) { return s.d_model / s.n_heads; }

void check_spec(const SyntheticSpec& s) {
  check(s.n_layers > 0 && s.d_model > 0 && s.n_heads > 0 && s.n_kv_heads > 0 && s.d_ff > 0 &&
            s.vocab_size > 0 && s.context_length > 0,
        "synthetic model: sizes must be positive");
  check(s.d_model % s.n_heads == 0 && head_dim(s) % 2 == 0 && s.n_heads % s.n_kv_heads == 0,
        "synthetic model: d_model {} must split into {} heads of an even size, and the heads "
        "into {} kv heads",
        s.d_model, s.n_heads, s.n_kv_heads);
  for (DType t : {s.weight_type, s.embed_type.value_or(s.weight_type)}) {
    const int block = dtype_info(t).block_size;
    check(s.d_model % block == 0 && s.d_ff % block == 0,
          "synthetic model: weight type {} needs d_model ({}) and d_ff ({}) to be multiples of "
          "its block size {}",
          dtype_name(t), s.d_model, s.d_ff, block);
  }
}

ModelConfig rope_config(const SyntheticSpec& s) {
  ModelConfig c;
  c.head_dim = head_dim(s);
  c.rope_theta = s.rope_theta;
  c.rope_scaling.type = RopeScaling::Type::Llama3;
  c.rope_scaling.factor = 8.0f;
  c.rope_scaling.low_freq_factor = 1.0f;
  c.rope_scaling.high_freq_factor = 4.0f;
  c.rope_scaling.original_context_length = 64;
  return c;
}

float round_through(DType t, float x) {
  if (t == DType::F16) return f16_to_f32(f32_to_f16(x));
  if (t == DType::BF16) return bf16_to_f32(f32_to_bf16(x));
  return x;
}

// Every weight of the model, generated once in a fixed order.
std::vector<WeightTensor> make_weights(const SyntheticSpec& s) {
  Rng rng(s.seed);
  std::vector<WeightTensor> out;
  auto add = [&](std::string hf, std::string gguf, Kind kind, std::vector<int64_t> shape,
                 float gain) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(n);
    // a = sqrt(3 / fan_in): unit-variance outputs for unit-variance inputs.
    const float a = kind == Kind::Matrix ? gain * std::sqrt(3.0f / shape[0]) : gain;
    for (auto& x : v) x = (kind == Kind::Norm ? 1.0f : 0.0f) + a * rng.uniform();
    out.push_back({std::move(hf), std::move(gguf), kind, std::move(shape), std::move(v)});
  };
  const int64_t d = s.d_model, ff = s.d_ff, V = s.vocab_size;
  const int64_t q_dim = int64_t{s.n_heads} * head_dim(s);
  const int64_t kv_dim = int64_t{s.n_kv_heads} * head_dim(s);
  add("model.embed_tokens.weight", "token_embd.weight", Kind::Embedding, {d, V}, 1.0f);
  for (int i = 0; i < s.n_layers; ++i) {
    auto hf = [&](const char* n) { return fmt::format("model.layers.{}.{}", i, n); };
    auto gg = [&](const char* n) { return fmt::format("blk.{}.{}", i, n); };
    add(hf("input_layernorm.weight"), gg("attn_norm.weight"), Kind::Norm, {d}, 0.1f);
    // q and k a little larger than unit gain so attention is not nearly uniform.
    add(hf("self_attn.q_proj.weight"), gg("attn_q.weight"), Kind::Matrix, {d, q_dim}, 1.5f);
    add(hf("self_attn.k_proj.weight"), gg("attn_k.weight"), Kind::Matrix, {d, kv_dim}, 1.5f);
    add(hf("self_attn.v_proj.weight"), gg("attn_v.weight"), Kind::Matrix, {d, kv_dim}, 1.0f);
    if (s.arch == Arch::Qwen2) {
      add(hf("self_attn.q_proj.bias"), gg("attn_q.bias"), Kind::Bias, {q_dim}, 0.1f);
      add(hf("self_attn.k_proj.bias"), gg("attn_k.bias"), Kind::Bias, {kv_dim}, 0.1f);
      add(hf("self_attn.v_proj.bias"), gg("attn_v.bias"), Kind::Bias, {kv_dim}, 0.1f);
    }
    add(hf("self_attn.o_proj.weight"), gg("attn_output.weight"), Kind::Matrix, {q_dim, d}, 1.0f);
    add(hf("post_attention_layernorm.weight"), gg("ffn_norm.weight"), Kind::Norm, {d}, 0.1f);
    add(hf("mlp.gate_proj.weight"), gg("ffn_gate.weight"), Kind::Matrix, {d, ff}, 1.0f);
    add(hf("mlp.up_proj.weight"), gg("ffn_up.weight"), Kind::Matrix, {d, ff}, 1.0f);
    add(hf("mlp.down_proj.weight"), gg("ffn_down.weight"), Kind::Matrix, {ff, d}, 1.0f);
  }
  add("model.norm.weight", "output_norm.weight", Kind::Norm, {d}, 0.1f);
  // A large LM head gain spreads the logits so greedy choices depend on the input.
  if (!s.tied_embeddings) add("lm_head.weight", "output.weight", Kind::Matrix, {d, V}, 4.0f);
  // Both files must hold the same values: round everything through the
  // Hugging Face dtype once, so every later conversion to it is exact.
  for (auto& t : out)
    for (auto& x : t.values) x = round_through(s.weight_type, x);
  return out;
}

bool is_llama_qk(const SyntheticSpec& s, const WeightTensor& t) {
  return s.arch == Arch::Llama && t.kind == Kind::Matrix &&
         (t.gguf_name.find(".attn_q.") != std::string::npos ||
          t.gguf_name.find(".attn_k.") != std::string::npos);
}

// llama.cpp's converter layout for llama q/k, written out independently of the
// loader's implementation so each checks the other:
// w.reshape(n_head, 2, d/2, cols).swapaxes(1, 2).reshape(rows, cols).
std::vector<float> permute_qk(const std::vector<float>& w, int64_t cols, int n_head) {
  const int64_t rows = static_cast<int64_t>(w.size()) / cols, d = rows / n_head;
  std::vector<float> out;
  out.reserve(w.size());
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < d / 2; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const float* src = &w[(h * d + j * (d / 2) + i) * cols];
        out.insert(out.end(), src, src + cols);
      }
  return out;
}

// ---- Tokenizer --------------------------------------------------------------

// GPT-2's byte-level alphabet: printable bytes stand for themselves, the rest
// (controls, space, 0x7F-0xA0, 0xAD) for U+0100 onwards, in byte order.
bool byte_is_printable(int b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::string byte_symbol(int b) {
  if (byte_is_printable(b)) return utf8(b);
  int n = 0;
  for (int c = 0; c < b; ++c) n += !byte_is_printable(c);
  return utf8(256 + n);
}

constexpr std::string_view kSample =
    "The quick brown fox jumps over the lazy dog. The dog is not lazy, the dog is tired. "
    "In the morning the fox and the dog went to the river, and then they sat in the sun. "
    "It is what it is: the answer is in the question, and the question is the answer. "
    "There is a house on the hill, and in the house there is a room with the light on.\n"
    "def main():\n    for i in range(10):\n        print(i)\n    return 0\n"
    "int main() { for (int i = 0; i < 10; ++i) { printf(\"%d\\n\", i); } return 0; }\n";

// Rough GPT-2-style words: an optional space plus letters, single digits,
// whitespace runs, single other characters. Merges never cross these.
std::vector<std::string> sample_words() {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto space = [](char c) { return c == ' ' || c == '\n'; };
  std::vector<std::string> out;
  const std::string_view t = kSample;
  size_t i = 0;
  while (i < t.size()) {
    size_t j = i;
    if (t[j] == ' ' && j + 1 < t.size() && alpha(t[j + 1])) ++j;
    if (alpha(t[j])) {
      while (j < t.size() && alpha(t[j])) ++j;
    } else if (space(t[j])) {
      while (j < t.size() && space(t[j])) ++j;
    } else {
      ++j;
    }
    out.emplace_back(t.substr(i, j - i));
    i = j;
  }
  return out;
}

// Byte-pair merges learnt from kSample: the most frequent adjacent pair each
// round (ties: the smallest pair), as "left right" in byte-level symbols.
std::vector<std::string> learn_merges(int n_merges) {
  std::map<std::vector<std::string>, int> words;
  for (const auto& w : sample_words()) {
    std::vector<std::string> syms;
    for (unsigned char ch : w) syms.push_back(byte_symbol(ch));
    ++words[syms];
  }
  std::vector<std::string> merges;
  while (static_cast<int>(merges.size()) < n_merges) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [syms, count] : words)
      for (size_t i = 0; i + 1 < syms.size(); ++i) pairs[{syms[i], syms[i + 1]}] += count;
    if (pairs.empty()) break;
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;
    const auto [a, b] = best->first;
    merges.push_back(a + " " + b);
    std::map<std::vector<std::string>, int> next;
    for (const auto& [syms, count] : words) {
      std::vector<std::string> m;
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
          m.push_back(a + b);
          ++i;
        } else {
          m.push_back(syms[i]);
        }
      }
      next[m] += count;
    }
    words = std::move(next);
  }
  return merges;
}

enum TokenType { kNormal = 1, kControl = 3, kUnused = 5 };  // GGUF token types

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  int n_regular = 0;  // bytes, merges and padding: the BPE model's own vocabulary
  int bos = -1, eos = -1, eot = -1, pad = -1;
  std::vector<int> generation_eos;  // generation_config.json
  bool add_bos = false;
  std::string pre, regex, chat_template;
};

constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Llama 3 (Meta-Llama-3-8B-Instruct) and Qwen2 ChatML chat templates.
constexpr const char* kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
constexpr const char* kChatMLTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

Vocab make_vocab(const SyntheticSpec& s) {
  const bool llama = s.arch == Arch::Llama;
  const std::vector<std::string> specials =
      llama ? std::vector<std::string>{"<|begin_of_text|>", "<|end_of_text|>",
                                       "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}
            : std::vector<std::string>{"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  const int room = s.vocab_size - 256 - static_cast<int>(specials.size());
  check(room >= 0,
        "synthetic model: vocab_size {} is too small for 256 byte tokens and {} "
        "special tokens",
        s.vocab_size, specials.size());
  Vocab v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_symbol(b));
  v.merges = learn_merges(std::min(64, room));
  std::set<std::string> seen(v.tokens.begin(), v.tokens.end());
  for (const auto& m : v.merges) {
    std::string merged = m;
    merged.erase(m.find(' '), 1);
    if (seen.insert(merged).second) v.tokens.push_back(merged);
  }
  v.types.assign(v.tokens.size(), kNormal);
  const int first_special = s.vocab_size - static_cast<int>(specials.size());
  for (int n = 0; static_cast<int>(v.tokens.size()) < first_special; ++n) {
    v.tokens.push_back(fmt::format("<unused_{}>", n));
    v.types.push_back(kUnused);
  }
  v.n_regular = first_special;
  for (const auto& sp : specials) {
    v.tokens.push_back(sp);
    v.types.push_back(kControl);
  }
  auto id = [&](const char* text) {
    for (int i = first_special; i < s.vocab_size; ++i)
      if (v.tokens[i] == text) return i;
    fail("synthetic model: no special token {}", text);
  };
  if (llama) {
    v.bos = id("<|begin_of_text|>");
    v.eos = id("<|end_of_text|>");
    v.eot = id("<|eot_id|>");
    v.generation_eos = {v.eos, v.eot};
    v.add_bos = true;
    v.pre = "llama-bpe";
    v.regex = kLlama3Regex;
    v.chat_template = kLlama3Template;
  } else {
    // As in Qwen2 GGUFs: <|endoftext|> doubles as BOS (never added) and padding.
    v.bos = id("<|endoftext|>");
    v.pad = v.bos;
    v.eos = id("<|im_end|>");
    v.generation_eos = {v.eos, v.bos};
    v.pre = "qwen2";
    v.regex = kQwen2Regex;
    v.chat_template = kChatMLTemplate;
  }
  return v;
}

void add_gguf_tokenizer(GGUFWriter& w, const Vocab& v) {
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", v.bos);
  w.set_u32("tokenizer.ggml.eos_token_id", v.eos);
  if (v.eot >= 0) w.set_u32("tokenizer.ggml.eot_token_id", v.eot);
  if (v.pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", v.pad);
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  w.set_string("tokenizer.chat_template", v.chat_template);
}

ojson added_token(int id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

ojson hf_tokenizer_json(const SyntheticSpec& s, const Vocab& v) {
  const bool llama = s.arch == Arch::Llama;
  ojson added = ojson::array();
  for (int i = v.n_regular; i < s.vocab_size; ++i) added.push_back(added_token(i, v.tokens[i]));
  ojson vocab = ojson::object();
  for (int i = 0; i < v.n_regular; ++i) vocab[v.tokens[i]] = i;
  ojson byte_level = {{"type", "ByteLevel"},
                      {"add_prefix_space", false},
                      {"trim_offsets", true},
                      {"use_regex", false}};
  ojson post;
  if (llama) {
    const std::string bos = v.tokens[v.bos];
    ojson bos_piece = {{"SpecialToken", {{"id", bos}, {"type_id", 0}}}};
    post = {{"type", "TemplateProcessing"},
            {"single", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"pair",
             {bos_piece,
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
              bos_piece,
              {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
            {"special_tokens", {{bos, {{"id", bos}, {"ids", {v.bos}}, {"tokens", {bos}}}}}}};
  } else {
    post = {{"type", "ByteLevel"},
            {"add_prefix_space", false},
            {"trim_offsets", false},
            {"use_regex", false}};
  }
  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = added;
  j["normalizer"] = llama ? ojson(nullptr) : ojson{{"type", "NFC"}};
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"},
                           {"pattern", {{"Regex", v.regex}}},
                           {"behavior", "Isolated"},
                           {"invert", false}},
                          byte_level}}};
  j["post_processor"] = post;
  j["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", llama},
                {"vocab", vocab},
                {"merges", v.merges}};
  return j;
}

ojson hf_tokenizer_config(const SyntheticSpec& s, const Vocab& v) {
  ojson decoder = ojson::object();
  for (int i = v.n_regular; i < s.vocab_size; ++i) {
    ojson t = added_token(i, v.tokens[i]);
    t.erase("id");
    decoder[std::to_string(i)] = t;
  }
  const bool llama = s.arch == Arch::Llama;
  ojson j;
  j["add_bos_token"] = v.add_bos;
  j["add_eos_token"] = false;
  j["added_tokens_decoder"] = decoder;
  j["bos_token"] = llama ? ojson(v.tokens[v.bos]) : ojson(nullptr);
  j["chat_template"] = v.chat_template;
  j["clean_up_tokenization_spaces"] = false;
  j["eos_token"] = v.tokens[v.eos];
  if (v.pad >= 0) j["pad_token"] = v.tokens[v.pad];
  j["model_max_length"] = s.context_length;
  j["tokenizer_class"] = "PreTrainedTokenizerFast";
  return j;
}

// ---- Files ------------------------------------------------------------------

void write_text(const fs::path& p, const std::string& text) {
  write_file_atomically(p.string(), [&](const WriteBytes& out) { out(text.data(), text.size()); });
}

const char* torch_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return "float32";
    case DType::F16:
      return "float16";
    default:
      return "bfloat16";
  }
}

ojson hf_config_json(const SyntheticSpec& s, const Vocab* v) {
  const bool llama = s.arch == Arch::Llama;
  ojson j;
  j["architectures"] = {llama ? "LlamaForCausalLM" : "Qwen2ForCausalLM"};
  j["model_type"] = llama ? "llama" : "qwen2";
  j["hidden_size"] = s.d_model;
  j["intermediate_size"] = s.d_ff;
  j["num_hidden_layers"] = s.n_layers;
  j["num_attention_heads"] = s.n_heads;
  j["num_key_value_heads"] = s.n_kv_heads;
  j["head_dim"] = head_dim(s);
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = s.context_length;
  j["rms_norm_eps"] = 1e-5;
  j["rope_theta"] = static_cast<double>(s.rope_theta);
  if (s.llama3_rope_scaling) {
    const ModelConfig rc = rope_config(s);
    j["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", rc.rope_scaling.factor},
        {"low_freq_factor", rc.rope_scaling.low_freq_factor},
        {"high_freq_factor", rc.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", rc.rope_scaling.original_context_length}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["tie_word_embeddings"] = s.tied_embeddings;
  j["vocab_size"] = s.vocab_size;
  j["torch_dtype"] = torch_dtype(s.weight_type);
  if (llama) {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  } else {
    j["use_sliding_window"] = false;
  }
  if (v) {
    j["bos_token_id"] = v->bos;
    j["eos_token_id"] = v->eos;
  }
  return j;
}

}  // namespace

std::string write_synthetic_gguf(const SyntheticSpec& s, const std::string& path) {
  check_spec(s);
  const bool llama = s.arch == Arch::Llama;
  const ModelShape dims{.arch = s.arch,
                        .n_layers = s.n_layers,
                        .d_model = s.d_model,
                        .n_heads = s.n_heads,
                        .n_kv_heads = s.n_kv_heads,
                        .d_ff = s.d_ff,
                        .vocab_size = s.vocab_size,
                        .context_length = s.context_length,
                        .rope_theta = s.rope_theta,
                        .norm_eps = 1e-5f};
  GGUFWriter w;
  set_architecture_metadata(w, dims, llama ? "synthetic-llama" : "synthetic-qwen2");
  if (s.with_tokenizer) add_gguf_tokenizer(w, make_vocab(s));

  const DType embed_type = s.embed_type.value_or(s.weight_type);
  for (const auto& t : make_weights(s)) {
    DType type = DType::F32;  // norms and biases
    if (t.kind == Kind::Embedding || t.gguf_name == "output.weight") {
      type = embed_type;
    } else if (t.kind == Kind::Matrix) {
      type = s.weight_type;
    }
    if (is_llama_qk(s, t)) {
      const bool is_q = t.gguf_name.find(".attn_q.") != std::string::npos;
      w.add_tensor_f32(t.gguf_name, type, t.shape,
                       permute_qk(t.values, t.shape[0], is_q ? s.n_heads : s.n_kv_heads));
    } else {
      w.add_tensor_f32(t.gguf_name, type, t.shape, t.values);
    }
  }
  if (s.llama3_rope_scaling)
    w.add_tensor_f32("rope_freqs.weight", DType::F32, {head_dim(s) / 2},
                     llama3_rope_factors(rope_config(s)));
  w.write(path);
  return path;
}

std::string write_synthetic_hf_dir(const SyntheticSpec& s, const std::string& dir, bool sharded) {
  check_spec(s);
  check(s.weight_type == DType::F32 || s.weight_type == DType::F16 || s.weight_type == DType::BF16,
        "synthetic HF model: weight type {} is not a safetensors type (F32, F16, BF16)",
        dtype_name(s.weight_type));
  const fs::path d(dir);
  std::error_code ec;
  fs::create_directories(d, ec);
  check(!ec, "{}: cannot create directory: {}", dir, ec.message());

  const auto weights = make_weights(s);
  if (!sharded) {
    SafetensorsWriter st;
    st.set_metadata("format", "pt");
    for (const auto& t : weights) st.add_f32(t.hf_name, s.weight_type, t.shape, t.values);
    st.write((d / "model.safetensors").string());
  } else {
    // The first half of the tensors in one shard, the rest in the other.
    const char* names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    SafetensorsWriter st[2];
    ojson weight_map = ojson::object();
    size_t total = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      const auto& t = weights[i];
      const int shard = i < weights.size() / 2 ? 0 : 1;
      st[shard].add_f32(t.hf_name, s.weight_type, t.shape, t.values);
      weight_map[t.hf_name] = names[shard];
      total += t.values.size() * (s.weight_type == DType::F32 ? 4 : 2);
    }
    for (int i = 0; i < 2; ++i) {
      st[i].set_metadata("format", "pt");
      st[i].write((d / names[i]).string());
    }
    ojson index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_text(d / "model.safetensors.index.json", index.dump(2));
  }

  std::optional<Vocab> vocab;
  if (s.with_tokenizer) vocab = make_vocab(s);
  write_text(d / "config.json", hf_config_json(s, vocab ? &*vocab : nullptr).dump(2));
  if (vocab) {
    write_text(d / "tokenizer.json", hf_tokenizer_json(s, *vocab).dump(2));
    write_text(d / "tokenizer_config.json", hf_tokenizer_config(s, *vocab).dump(2));
    ojson gen = {{"bos_token_id", vocab->bos}, {"eos_token_id", vocab->generation_eos}};
    write_text(d / "generation_config.json", gen.dump(2));
  }
  return dir;
}

std::string raw_safetensors(const std::string& header_json, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header_json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header_json + data;
}

}  // namespace tandem::test
