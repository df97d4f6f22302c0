// `tandem chat-template (-m MODEL | --template FILE) [--no-generation-prompt]`:
// the prompt text a chat request renders to. stdin holds one chat request per
// line ({"messages": [...], "tools": [...]}, as the server's body); stdout gets
// one JSON string per line, or {"error": "..."} for a request the server would
// refuse. The messages and tools go through the server's own parsing, so this is
// exactly what `tandem serve` feeds the model.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "io/gguf_reader.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "tokenizer/chat_template.h"

namespace tandem::cli {
namespace {

std::string read_template(const std::string& model, const std::string& file) {
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    check(in.good(), "{}: cannot open the template file", file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  GGUFFile f(model);
  auto t = f.opt_string("tokenizer.chat_template");
  check(t.has_value(), "{}: the model has no tokenizer.chat_template", model);
  return *t;
}

std::string render_line(ChatTemplateFamily family, const std::string& tmpl, const std::string& line,
                        bool generation_prompt) {
  try {
    const server::ParsedRequest p = server::parse_request(line, server::Endpoint::ChatCompletions);
    std::vector<std::string> tools;
    for (const auto& t : p.tools.tools) tools.push_back(t.definition);
    return nlohmann::json(render_chat(family, tmpl, p.messages, generation_prompt, tools)).dump();
  } catch (const server::ApiError& e) {
    return nlohmann::json{{"error", e.what()}}.dump();
  } catch (const Error& e) {
    return nlohmann::json{{"error", e.what()}}.dump();
  }
}

}  // namespace

void add_chat_template_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "chat-template", "Render chat requests (one JSON body per stdin line) to prompt text");
  struct Opts {
    std::string model, file;
    bool no_generation_prompt = false;
  };
  auto opts = std::make_shared<Opts>();
  Opts& o = *opts;
  cmd->add_option("-m,--model", o.model, "GGUF file whose tokenizer.chat_template to use");
  cmd->add_option("--template", o.file, "A Jinja chat template file instead of a model's");
  cmd->add_flag("--no-generation-prompt", o.no_generation_prompt,
                "Leave out the assistant header that opens the reply");
  cmd->callback([opts] {
    const Opts& o = *opts;
    check(o.model.empty() != o.file.empty(), "chat-template: give either -m MODEL or --template");
    const std::string tmpl = read_template(o.model, o.file);
    const ChatTemplateFamily family = detect_chat_template(tmpl);
    std::string line;
    while (std::getline(std::cin, line)) {
      const std::string out = render_line(family, tmpl, line, !o.no_generation_prompt) + "\n";
      std::fwrite(out.data(), 1, out.size(), stdout);
    }
  });
}

}  // namespace tandem::cli
