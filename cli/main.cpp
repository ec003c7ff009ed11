// dtplan: the command line. This file only wires subcommands; each lives in its own cmd_*.cpp.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"

int main(int argc, char** argv) {
  CLI::App app{"dtplan: parallelism planner and performance model for large-model training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dtplan 0.1.0");
  app.footer(
      "Exit codes: 0 success, 2 bad input (file, flag or layout), 3 a claim refuted (check "
      "--claims), 1 internal error.");
  // Temporary output files are removed when the run is interrupted (core/atomic_file.h).
  dtplan::install_cleanup_handlers();
  // Parsed as soon as it is read (trigger_on_parse), before any subcommand reads its inputs;
  // fallthrough lets it follow the subcommand too.
  app.fallthrough();
  app.add_option_function<double>(
         "--max-input-mib",
         [](double mib) { dtplan::set_max_input_bytes(static_cast<int64_t>(mib * (1 << 20))); },
         "Largest input file read, in MiB (default 256)")
      ->check(CLI::Range(1.0, 1048576.0))
      ->trigger_on_parse();
  dtplan::cli::CommandContext ctx;
  dtplan::cli::register_list(app, ctx);
  dtplan::cli::register_import_hf(app, ctx);
  dtplan::cli::register_check(app, ctx);
  dtplan::cli::register_estimate(app, ctx);
  dtplan::cli::register_accuracy(app, ctx);
  dtplan::cli::register_search(app, ctx);
  dtplan::cli::register_launch(app, ctx);
  dtplan::cli::register_simulate(app, ctx);
  dtplan::cli::register_calibrate(app, ctx);
  dtplan::cli::register_report(app, ctx);
  dtplan::cli::register_whatif(app, ctx);
  dtplan::cli::register_collective(app, ctx);
  dtplan::cli::register_rl(app, ctx);
  dtplan::cli::register_execute(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "dtplan: error: {}\n", e.what());
    fmt::print(stderr, "Run with --help for usage.\n");
    return 2;
  } catch (const dtplan::InputError& e) {
    fmt::print(stderr, "dtplan: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "dtplan: internal error: {}\n", e.what());
    return 1;
  }
  return ctx.exit_code;
}
