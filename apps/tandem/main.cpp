// tandem: command-line front end. Errors from the library arrive as
// tandem::Error and are printed as one line with a non-zero exit code.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"tandem: lossless speculative decoding for Llama-family models"};
  app.require_subcommand(1);
  tandem::cli::add_generate_command(app);
  tandem::cli::add_info_command(app);
  tandem::cli::add_logits_command(app);
  tandem::cli::add_tokenize_command(app);
  tandem::cli::add_chat_template_command(app);
  tandem::cli::add_bench_command(app);
  tandem::cli::add_serve_command(app);
  tandem::cli::add_synth_model_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error (CLI11 would add a second one).
    std::fprintf(stderr, "error: %s (see --help)\n", e.what());
    return e.get_exit_code() ? e.get_exit_code() : 2;
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
