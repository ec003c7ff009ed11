// dtplan: the command line. This file only wires subcommands; each lives in its own cmd_*.cpp.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"

namespace {

// What CLI11 leaves out of a parse error: which command was unknown, and for a flag it did not
// expect, the nearest flag of the command being run ("did you mean").
std::string parse_hint(CLI::App& app, int argc, char** argv, const std::string& what) {
  // CLI11's range check speaks of a range when the value is not a number at all.
  const std::string range = "Value ";
  if (const size_t at = what.find(range); at != std::string::npos) {
    const std::string value =
        what.substr(at + range.size(), what.find(' ', at + range.size()) - (at + range.size()));
    char* end = nullptr;
    (void)std::strtod(value.c_str(), &end);
    if (!value.empty() && (end == value.c_str() || *end != '\0'))
      return fmt::format("\n'{}' is not a number", value);
  }
  std::vector<std::string> commands;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    commands.push_back(sub->get_name());
  CLI::App* cmd = nullptr;
  for (int i = 1; i < argc && !cmd; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-", 0) == 0) continue;
    // The value of an option given before the command (--max-input-mib 512 estimate ...).
    const CLI::Option* before = i > 1 ? app.get_option_no_throw(argv[i - 1]) : nullptr;
    if (before && before->get_expected_max() > 0) continue;
    if (std::find(commands.begin(), commands.end(), a) == commands.end())
      return fmt::format("\nunknown command '{}'{}; the commands: {}", a,
                         dtplan::did_you_mean(a, commands), fmt::join(commands, ", "));
    cmd = app.get_subcommand(a);
  }
  if (!cmd) return "";
  std::vector<std::string> flags;
  for (CLI::App* owner : {&app, cmd})
    for (const CLI::Option* o : owner->get_options())
      for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
  std::string hint;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") continue;
    a = a.substr(0, a.find('='));
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) continue;
    const std::string near = dtplan::nearest_name(a, flags);
    hint += fmt::format("\n{}: not a flag of '{}'{}", a, cmd->get_name(),
                        near.empty() ? "" : fmt::format(" (did you mean {}?)", near));
  }
  return hint;
}

// A run whose output would overwrite one of its input files or another of its outputs (`search
// --csv X --out X`, `import-hf c.json --out c.json`, `calibrate --backend replay --input j --out
// j`) is refused before anything is read or written (a hostile-input trial lost data that way).
void refuse_clobbering(const CLI::App& cmd) {
  static const char* const kOutputs[] = {"--out",         "--csv",    "--summary", "--trace",
                                         "--write-bands", "--op-log", "--journal"};
  static const char* const kInputs[] = {"--model",    "--cluster", "--cases",  "--from",
                                        "--input",    "--config",  "--claims", "--nodes-file",
                                        "--validate", "config",    "--profile"};
  namespace fs = std::filesystem;
  struct Path {
    std::string flag, text;
    fs::path canonical;
  };
  auto canonical = [](const std::string& text) {
    std::error_code ec;
    fs::path c = fs::weakly_canonical(fs::absolute(text, ec), ec);
    return ec ? fs::path() : c;
  };
  std::vector<Path> outputs, inputs;
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->count() == 0) continue;
    bool is_out = false, is_in = false;
    for (const std::string& n : o->get_lnames()) {
      for (const char* x : kOutputs) is_out |= "--" + n == x;
      for (const char* x : kInputs) is_in |= "--" + n == x;
    }
    for (const char* x : kInputs) is_in |= o->get_name() == x;
    if (!is_out && !is_in) continue;
    for (const std::string& text : o->results()) {
      if (text.empty() || text == "-") continue;
      std::error_code ec;
      // An input counts only where it names a file (a zoo model name does not).
      if (is_in && !fs::is_regular_file(text, ec)) continue;
      const fs::path c = canonical(text);
      if (c.empty()) continue;
      (is_out ? outputs : inputs).push_back({o->get_name(), text, c});
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t k = i + 1; k < outputs.size(); ++k)
      if (outputs[i].canonical == outputs[k].canonical)
        throw dtplan::InputError({}, outputs[k].flag,
                                 fmt::format("'{}' is also {}'s file: two outputs would overwrite "
                                             "each other",
                                             outputs[k].text, outputs[i].flag));
    for (const Path& in : inputs) {
      std::error_code ec;
      if (outputs[i].canonical == in.canonical || fs::equivalent(outputs[i].text, in.text, ec))
        throw dtplan::InputError({}, outputs[i].flag,
                                 fmt::format("'{}' is the input of {}: writing it would overwrite "
                                             "what the run reads",
                                             outputs[i].text, in.flag));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dtplan: parallelism planner and performance model for large-model training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dtplan 0.1.0");
  app.footer(
      "Exit codes: 0 success, 2 bad input (file, flag or layout), 3 a claim refuted (check "
      "--claims), 4 a run ended by its watchdog (calibrate, execute: a peer stopped or dead), 1 "
      "internal error.");
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
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    sub->parse_complete_callback([sub] { refuse_clobbering(*sub); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "dtplan: error: {}{}\n", e.what(), parse_hint(app, argc, argv, e.what()));
    fmt::print(stderr, "Run with --help for usage.\n");
    return dtplan::kExitBadInput;
  } catch (const dtplan::InputError& e) {
    fmt::print(stderr, "dtplan: error: {}\n", e.what());
    return dtplan::kExitBadInput;
  } catch (const std::exception& e) {
    fmt::print(stderr, "dtplan: internal error: {}\n", e.what());
    return dtplan::kExitInternal;
  }
  return ctx.exit_code;
}
