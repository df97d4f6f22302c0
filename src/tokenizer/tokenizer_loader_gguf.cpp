// Tokenizer::from_gguf: the tokenizer.ggml.* metadata of a GGUF file.
#include <fmt/format.h>

#include "core/error.h"
#include "io/gguf_reader.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/pretokenizer_presets.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tandem {
namespace {

Vocab read_vocab(const GGUFFile& f) {
  const std::string& path = f.path();
  Vocab v;
  v.source = path;
  v.pieces = f.get_string_array("tokenizer.ggml.tokens");
  check(!v.pieces.empty(), "{}: tokenizer.ggml.tokens is empty", path);
  const size_t n = v.pieces.size();
  check(n <= 0x7FFFFFFF, "{}: tokenizer.ggml.tokens has {} entries, too many", path, n);
  if (f.has("tokenizer.ggml.token_type")) {
    auto types = f.get_int_array("tokenizer.ggml.token_type");
    check(types.size() == n, "{}: tokenizer.ggml.token_type has {} entries for {} tokens", path,
          types.size(), n);
    v.types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      check(types[i] >= 0 && types[i] <= 6,
            "{}: tokenizer.ggml.token_type[{}] = {} is not a token type (0-6)", path, i, types[i]);
      v.types.push_back(static_cast<TokenType>(types[i]));
    }
  } else {
    v.types.assign(n, TokenType::Normal);
  }
  return v;
}

// A token id field: absent -> -1; present -> must name a token.
int read_id(const GGUFFile& f, const std::string& key, int n) {
  auto id = f.opt_int(key);
  if (!id) return -1;
  check(*id >= 0 && *id < n, "{}: {} = {} is outside the vocabulary [0, {})", f.path(), key, *id,
        n);
  return static_cast<int>(*id);
}

std::vector<std::pair<std::string, std::string>> read_merges(const GGUFFile& f) {
  auto lines = f.get_string_array("tokenizer.ggml.merges");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& m = lines[i];
    // The first space after the first character separates the two texts.
    size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    check(sp != std::string::npos && sp + 1 < m.size(),
          "{}: tokenizer.ggml.merges[{}] = '{}' is not two texts separated by a space", f.path(), i,
          m);
    merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  return merges;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile& f) {
  const std::string& path = f.path();
  check(f.has("tokenizer.ggml.model"),
        "{}: no tokenizer: metadata key tokenizer.ggml.model is missing", path);
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama")
    fail("{}: tokenizer.ggml.model = '{}' is not supported (supported: gpt2, llama)", path, model);

  Vocab vocab = read_vocab(f);
  const int n = vocab.size();
  SpecialIds ids;
  ids.bos = read_id(f, "tokenizer.ggml.bos_token_id", n);
  ids.eos = read_id(f, "tokenizer.ggml.eos_token_id", n);
  ids.eot = read_id(f, "tokenizer.ggml.eot_token_id", n);
  ids.eom = read_id(f, "tokenizer.ggml.eom_token_id", n);
  ids.unk = read_id(f, "tokenizer.ggml.unknown_token_id", n);
  auto add_bos = f.opt_bool("tokenizer.ggml.add_bos_token");

  if (model == "llama") {
    auto scores = f.get_float_array("tokenizer.ggml.scores");
    check(scores.size() == vocab.pieces.size(),
          "{}: tokenizer.ggml.scores has {} entries for {} tokens", path, scores.size(),
          vocab.pieces.size());
    vocab.scores.assign(scores.begin(), scores.end());
    ids.add_bos = add_bos.value_or(true);
    bool space_prefix = f.opt_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    return std::make_unique<SpmTokenizer>(std::move(vocab), ids, space_prefix);
  }

  const std::string pre = f.opt_string("tokenizer.ggml.pre").value_or("default");
  auto preset = find_pretokenizer_preset(pre);
  if (!preset)
    fail("{}: tokenizer.ggml.pre = '{}' is not a known pre-tokenizer (known: {})", path, pre,
         known_pretokenizer_presets());
  auto merges = read_merges(f);
  ids.add_bos = add_bos.value_or(preset->add_bos);
  BpeOptions opts;
  opts.pre = pre;
  opts.split_patterns = preset->patterns;
  opts.ignore_merges = preset->ignore_merges;
  return std::make_unique<ByteLevelBpeTokenizer>(std::move(vocab), merges, ids, std::move(opts));
}

}  // namespace tandem
