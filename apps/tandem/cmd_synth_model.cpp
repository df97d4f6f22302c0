// `tandem synth-model --shape NAME -o FILE [--seed N]`: a GGUF with random
// weights at a real model's shape and tensor types (model/model_shape.h), for
// benchmarks where the real file cannot go (the GPU machine: docs/cuda.md).
// `--list` prints the shapes with their sizes.
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>

#include "commands.h"
#include "model/model_shape.h"

namespace tandem::cli {

void add_synth_model_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "synth-model", "Write a GGUF with random weights at a real model's shape and tensor types");
  struct Opts {
    std::string shape, out;
    uint64_t seed = 1;
    bool list = false;
  };
  auto opts = std::make_shared<Opts>();
  Opts& o = *opts;
  cmd->add_option("--shape", o.shape, "The shape's name (see --list)");
  cmd->add_option("-o,--output", o.out, "The GGUF file to write");
  cmd->add_option("--seed", o.seed, "Seed of the random weights (default 1)");
  cmd->add_flag("--list", o.list, "List the shapes and their sizes");
  cmd->callback([cmd, opts] {
    const Opts& o = *opts;
    if (o.list) {
      for (const auto& name : model_shape_names()) {
        const ModelShape s = model_shape(name);
        fmt::print("{:28} {} layers, d_model {}, d_ff {}, vocab {}, {} tensors, {:.3f} GB\n", name,
                   s.n_layers, s.d_model, s.d_ff, s.vocab_size, s.tensors.size(), s.bytes() / 1e9);
      }
      return;
    }
    if (o.shape.empty() || o.out.empty())
      throw CLI::ValidationError(cmd->get_name(), "--shape and --output are required");
    const ModelShape s = model_shape(o.shape);
    const auto t0 = std::chrono::steady_clock::now();
    write_random_gguf(s, o.out, o.seed);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("{}: {} ({} tensors, {:.3f} GB) in {:.1f} s\n", o.out, s.name, s.tensors.size(),
               s.bytes() / 1e9, sec);
  });
}

}  // namespace tandem::cli
