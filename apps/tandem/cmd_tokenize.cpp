// `tandem tokenize -m MODEL [--jsonl] [--no-bos] [--no-special] [TEXT]`: the
// token ids of a text as one JSON array. MODEL is a GGUF file (only its
// tokenizer metadata is read, so vocab-only files work), a Hugging Face
// directory or a tokenizer.json. With --jsonl, stdin holds one JSON string per
// line and stdout gets one JSON array of ids per line.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "io/gguf_reader.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  check(fs::exists(path), "{}: no such file or directory", path);
  if (fs::is_directory(path)) {
    fs::path json = fs::path(path) / "tokenizer.json";
    check(fs::exists(json), "{}: directory has no tokenizer.json", path);
    return Tokenizer::from_hf_json(json.string());
  }
  if (fs::path(path).extension() == ".json") return Tokenizer::from_hf_json(path);
  GGUFFile f(path);
  return Tokenizer::from_gguf(f);
}

void print_ids(const std::vector<int>& ids) {
  std::string line = nlohmann::json(ids).dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text as a JSON array");
  struct Opts {
    std::string model, text;
    bool jsonl = false, no_bos = false, no_special = false;
  };
  auto opts = std::make_shared<Opts>();
  Opts& o = *opts;
  cmd->add_option("-m,--model", o.model, "GGUF file, Hugging Face directory or tokenizer.json")
      ->required();
  cmd->add_option("text", o.text, "Text to tokenize");
  cmd->add_flag("--jsonl", o.jsonl,
                "Read one JSON string per line from stdin, write one JSON array of ids per line");
  cmd->add_flag("--no-bos", o.no_bos, "Do not add BOS even where the tokenizer adds it");
  cmd->add_flag("--no-special", o.no_special,
                "Treat the text of control tokens (e.g. <|eot_id|>) as plain text");
  cmd->callback([cmd, opts] {
    const Opts& o = *opts;
    const bool has_text = cmd->count("text") > 0;
    check(o.jsonl != has_text, "tokenize: give either TEXT or --jsonl (stdin)");
    auto tok = load_tokenizer(o.model);
    const bool bos = tok->add_bos() && !o.no_bos;
    const bool special = !o.no_special;
    if (!o.jsonl) {
      print_ids(tok->encode(o.text, bos, special));
      return;
    }
    std::string line;
    for (size_t n = 1; std::getline(std::cin, line); ++n) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {
        fail("stdin line {}: not valid JSON: {}", n, e.what());
      }
      check(j.is_string(), "stdin line {}: expected a JSON string, got {}", n, j.type_name());
      print_ids(tok->encode(j.get<std::string>(), bos, special));
      std::fflush(stdout);
    }
  });
}

}  // namespace tandem::cli
