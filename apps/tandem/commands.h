// Each subcommand of the `tandem` CLI registers itself on the app from its own
// cmd_*.cpp file; main.cpp only lists them.
#pragma once
#include <CLI/CLI.hpp>

namespace tandem::cli {

void add_info_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_chat_template_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_bench_spec_command(CLI::App* bench);   // `bench spec`, called by add_bench_command
void add_bench_serve_command(CLI::App* bench);  // `bench serve`, called by add_bench_command
void add_bench_agent_command(CLI::App* bench);  // `bench agent`, called by add_bench_command
void add_serve_command(CLI::App& app);
void add_synth_model_command(CLI::App& app);

}  // namespace tandem::cli
