// `tandem info -m MODEL`: what a model file contains.
#include <fmt/format.h>

#include <map>

#include "commands.h"
#include "io/gguf_reader.h"

namespace tandem::cli {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show a model's architecture, dimensions and tensor types");
  static std::string model;
  static bool all_metadata = false;
  cmd->add_option("-m,--model", model, "GGUF file or Hugging Face directory")->required();
  cmd->add_flag("--metadata", all_metadata, "Print every metadata key");
  cmd->callback([] {
    GGUFFile f(model);
    fmt::print("file: {}\nformat: GGUF v{}\n", f.path(), f.version());
    std::map<std::string, int> types;
    for (const auto& t : f.tensors()) types[std::string(dtype_name(t.type))]++;
    fmt::print("tensors: {}\n", f.tensors().size());
    for (const auto& [name, n] : types) fmt::print("  {}: {}\n", name, n);
    if (all_metadata)
      for (const auto& [k, v] : f.metadata()) fmt::print("{} = {}\n", k, gguf_value_to_string(v));
  });
}

}  // namespace tandem::cli
