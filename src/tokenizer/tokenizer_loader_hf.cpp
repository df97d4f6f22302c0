// Tokenizer::from_hf_json: a Hugging Face tokenizer.json holding a byte-level
// BPE model, with tokenizer_config.json beside it when present.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/json_text.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/pretokenizer_presets.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "{}: cannot open file", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string error;
  auto j = try_parse_json(ss.str(), &error);
  if (!j) fail("{}: not valid JSON: {}", path, error);
  return std::move(*j);
}

// A field that, when present and not null, must have the expected JSON type.
const json* field(const json& obj, const char* key, json::value_t type, const std::string& path,
                  const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  bool ok =
      it->type() == type || (type == json::value_t::number_integer && it->is_number_unsigned());
  check(ok, "{}: {}.{} has the wrong type ({})", path, where, key, it->type_name());
  return &*it;
}

// Characters with a meaning in regexes, escaped so that a literal string
// pattern can be used as one.
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

struct PreTokenizerSpec {
  std::vector<std::string> patterns;
  bool byte_level = false;
  bool add_prefix_space = false;
};

void parse_pre_tokenizer(const json& p, const std::string& path, PreTokenizerSpec& spec) {
  check(p.is_object() && p.contains("type") && p["type"].is_string(),
        "{}: pre_tokenizer entries must be objects with a \"type\"", path);
  const std::string type = p["type"];
  if (type == "Sequence") {
    const json* list = field(p, "pretokenizers", json::value_t::array, path, "pre_tokenizer");
    check(list != nullptr, "{}: pre_tokenizer Sequence without \"pretokenizers\"", path);
    for (const auto& e : *list) parse_pre_tokenizer(e, path, spec);
  } else if (type == "Split") {
    check(p.value("invert", false) == false, "{}: pre_tokenizer Split with invert is not supported",
          path);
    std::string behavior = p.value("behavior", "Isolated");
    check(behavior == "Isolated",
          "{}: pre_tokenizer Split behavior '{}' is not supported (only Isolated)", path, behavior);
    const json& pat = p.value("pattern", json());
    if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string())
      spec.patterns.push_back(pat["Regex"]);
    else if (pat.is_object() && pat.contains("String") && pat["String"].is_string())
      spec.patterns.push_back(regex_escape(pat["String"]));
    else
      fail("{}: pre_tokenizer Split needs a pattern {{\"Regex\": ...}} or {{\"String\": ...}}",
           path);
  } else if (type == "Digits") {
    spec.patterns.push_back(p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else if (type == "ByteLevel") {
    bool prefix = p.value("add_prefix_space", false);
    // Hugging Face prepends the space to every piece present at this point;
    // only at the start is that the same as prepending it to the text.
    check(!prefix || spec.patterns.empty(),
          "{}: pre_tokenizer ByteLevel with add_prefix_space after other splits is not supported",
          path);
    spec.add_prefix_space = spec.add_prefix_space || prefix;
    if (p.value("use_regex", true)) spec.patterns.push_back(pretok_regex::kGpt2);
    spec.byte_level = true;
  } else {
    fail("{}: pre_tokenizer type '{}' is not supported (Sequence, Split, Digits, ByteLevel are)",
         path, type);
  }
}

// Whether the text needs NFC; other normalizers are refused rather than ignored.
bool parse_normalizer(const json& n, const std::string& path) {
  if (n.is_null()) return false;
  check(n.is_object() && n.contains("type") && n["type"].is_string(),
        "{}: normalizer must be null or an object with a \"type\"", path);
  const std::string type = n["type"];
  if (type == "NFC") return true;
  if (type == "Sequence") {
    bool nfc = false;
    const json* list = field(n, "normalizers", json::value_t::array, path, "normalizer");
    check(list != nullptr, "{}: normalizer Sequence without \"normalizers\"", path);
    for (const auto& e : *list) nfc = parse_normalizer(e, path) || nfc;
    return nfc;
  }
  fail("{}: normalizer type '{}' is not supported (only NFC)", path, type);
}

// The text of a token setting in tokenizer_config.json: "text" or {"content": "text"}.
std::optional<std::string> token_text(const json& cfg, const char* key, const std::string& path) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  fail("{}: {} must be a string or {{\"content\": ...}}", path, key);
}

// The token a TemplateProcessing post-processor puts before a single sequence
// (Llama 3's <|begin_of_text|>), if any.
std::optional<std::string> template_bos(const json& pp) {
  if (!pp.is_object()) return std::nullopt;
  std::string type = pp.value("type", "");
  if (type == "Sequence" && pp.contains("processors") && pp["processors"].is_array()) {
    for (const auto& p : pp["processors"])
      if (auto t = template_bos(p)) return t;
    return std::nullopt;
  }
  if (type != "TemplateProcessing" || !pp.contains("single") || !pp["single"].is_array() ||
      pp["single"].empty())
    return std::nullopt;
  const json& first = pp["single"][0];
  if (first.is_object() && first.contains("SpecialToken") && first["SpecialToken"].is_object() &&
      first["SpecialToken"].contains("id") && first["SpecialToken"]["id"].is_string())
    return first["SpecialToken"]["id"].get<std::string>();
  return std::nullopt;
}

std::string pretokenizer_name(const std::vector<std::string>& patterns) {
  using namespace pretok_regex;
  static const std::vector<std::pair<std::vector<std::string>, std::string>> known = {
      {{kLlama3}, "llama-bpe"},
      {{kQwen2}, "qwen2"},
      {{kGpt2}, "gpt-2"},
      {{R"(\p{N})", kGpt2}, "starcoder"},
  };
  for (const auto& [p, name] : known)
    if (p == patterns) return name;
  return "tokenizer.json";
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_json(const std::string& path) {
  const json root = read_json(path);
  check(root.is_object(), "{}: expected a JSON object at the top level", path);
  const json* model = field(root, "model", json::value_t::object, path, "tokenizer");
  check(model != nullptr, "{}: no \"model\" object", path);
  const json* type = field(*model, "type", json::value_t::string, path, "model");
  check(type != nullptr && *type == "BPE", "{}: model.type is '{}'; only BPE is supported", path,
        type ? type->get<std::string>() : "missing");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = field(*model, key, json::value_t::string, path, "model");
    check(v == nullptr || v->get<std::string>().empty(), "{}: model.{} is not supported", path,
          key);
  }

  // Vocabulary: model.vocab plus added_tokens.
  const json* vocab_obj = field(*model, "vocab", json::value_t::object, path, "model");
  check(vocab_obj != nullptr, "{}: model.vocab is missing", path);
  const json* added = field(root, "added_tokens", json::value_t::array, path, "tokenizer");
  auto valid_id = [](const json& id) {
    return id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < 0x7FFFFFFF;
  };
  int n = 0;  // one past the highest id
  for (const auto& [text, id] : vocab_obj->items()) {
    check(valid_id(id), "{}: model.vocab[\"{}\"] is not a token id: {}", path, text,
          json_excerpt(id));
    n = std::max(n, id.get<int>() + 1);
  }
  const size_t entries = vocab_obj->size() + (added ? added->size() : 0);
  Vocab vocab;
  vocab.source = path;
  std::vector<bool> named;
  // Added tokens may extend the ids; a gap is tolerated, a huge one is not.
  auto grow = [&](int id) {
    check(static_cast<size_t>(id) < 2 * entries + 1024,
          "{}: token id {} is far beyond the {} tokens the file defines", path, id, entries);
    if (id >= vocab.size()) {
      vocab.pieces.resize(id + 1);
      vocab.types.resize(id + 1, TokenType::Unused);  // ids no entry names stay unused
      named.resize(id + 1, false);
    }
  };
  if (n > 0) grow(n - 1);
  for (const auto& [text, id] : vocab_obj->items()) {
    int i = id.get<int>();
    check(!named[i], "{}: model.vocab gives id {} to more than one token", path, i);
    named[i] = true;
    vocab.pieces[i] = text;
    vocab.types[i] = TokenType::Normal;
  }
  std::vector<SpecialTokenText> specials;
  for (size_t k = 0; added && k < added->size(); ++k) {
    const json& t = (*added)[k];
    std::string where = fmt::format("added_tokens[{}]", k);
    check(t.is_object(), "{}: {} is not an object", path, where);
    const json* id = field(t, "id", json::value_t::number_integer, path, where);
    const json* content = field(t, "content", json::value_t::string, path, where);
    check(id && content, "{}: {} needs \"id\" and \"content\"", path, where);
    check(valid_id(*id), "{}: {}.id = {} is not a token id", path, where, json_excerpt(*id));
    const int i = id->get<int>();
    const std::string text = content->get<std::string>();
    grow(i);
    check(!named[i] || vocab.pieces[i] == text,
          "{}: {} gives id {} to '{}', which model.vocab gives to '{}'", path, where, i, text,
          vocab.pieces[i]);
    named[i] = true;
    vocab.pieces[i] = text;
    const bool special = t.value("special", false);
    vocab.types[i] = special ? TokenType::Control : TokenType::UserDefined;
    specials.push_back({text, i, special, t.value("lstrip", false), t.value("rstrip", false)});
  }
  check(vocab.size() > 0, "{}: the vocabulary is empty", path);
  n = vocab.size();

  // Merges: "a b" strings, or [a, b] pairs in newer files.
  std::vector<std::pair<std::string, std::string>> merges;
  if (const json* ms = field(*model, "merges", json::value_t::array, path, "model")) {
    merges.reserve(ms->size());
    for (size_t i = 0; i < ms->size(); ++i) {
      const json& m = (*ms)[i];
      if (m.is_string()) {
        const std::string s = m;
        size_t sp = s.find(' ');
        check(sp != std::string::npos && sp > 0 && sp + 1 < s.size() &&
                  s.find(' ', sp + 1) == std::string::npos,
              "{}: model.merges[{}] = '{}' is not two texts separated by a space", path, i, s);
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        merges.emplace_back(m[0], m[1]);
      } else {
        fail("{}: model.merges[{}] = {} is neither \"a b\" nor [\"a\", \"b\"]", path, i,
             json_excerpt(m));
      }
    }
  }

  BpeOptions opts;
  opts.nfc = parse_normalizer(root.value("normalizer", json()), path);
  PreTokenizerSpec pre;
  if (root.contains("pre_tokenizer") && !root["pre_tokenizer"].is_null())
    parse_pre_tokenizer(root["pre_tokenizer"], path, pre);
  check(pre.byte_level,
        "{}: not a byte-level BPE tokenizer (no ByteLevel pre-tokenizer); "
        "only byte-level BPE tokenizer.json files are supported",
        path);
  opts.split_patterns = pre.patterns;
  opts.add_prefix_space = pre.add_prefix_space;
  opts.pre = pretokenizer_name(pre.patterns);
  opts.ignore_merges = model->value("ignore_merges", false);

  // Special ids: tokenizer_config.json beside the file, then the post-processor.
  auto find_id = [&](const std::string& text) -> int {
    for (int id = 0; id < n; ++id)
      if (vocab.pieces[id] == text && vocab.types[id] != TokenType::Unused) return id;
    return -1;
  };
  SpecialIds ids;
  std::optional<std::string> bos_text = template_bos(root.value("post_processor", json()));
  ids.add_bos = bos_text.has_value();
  fs::path cfg_path = fs::path(path).parent_path() / "tokenizer_config.json";
  std::optional<std::string> eos_text;
  if (fs::exists(cfg_path)) {
    const std::string cp = cfg_path.string();
    json cfg = read_json(cp);
    check(cfg.is_object(), "{}: expected a JSON object at the top level", cp);
    if (auto t = token_text(cfg, "bos_token", cp)) bos_text = t;
    eos_text = token_text(cfg, "eos_token", cp);
    if (auto it = cfg.find("add_bos_token"); it != cfg.end() && !it->is_null()) {
      check(it->is_boolean(), "{}: add_bos_token must be true or false", cp);
      ids.add_bos = it->get<bool>();
    }
    for (auto [text, id] : {std::pair{&bos_text, &ids.bos}, std::pair{&eos_text, &ids.eos}}) {
      if (!*text) continue;
      *id = find_id(**text);
      check(*id >= 0, "{}: token '{}' is not in the vocabulary of {}", cp, **text, path);
    }
  } else if (bos_text) {
    ids.bos = find_id(*bos_text);
    check(ids.bos >= 0, "{}: post_processor adds '{}', which is not in the vocabulary", path,
          *bos_text);
  }
  return std::make_unique<ByteLevelBpeTokenizer>(std::move(vocab), merges, ids, std::move(opts),
                                                 std::move(specials));
}

}  // namespace tandem
