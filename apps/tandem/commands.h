// Each subcommand of the `tandem` CLI registers itself on the app from its own
// cmd_*.cpp file; main.cpp only lists them.
#pragma once
#include <CLI/CLI.hpp>

namespace tandem::cli {

void add_info_command(CLI::App& app);

}  // namespace tandem::cli
