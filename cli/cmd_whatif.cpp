#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "reports/renderers.h"
#include "reports/whatif.h"

namespace dtplan::cli {

void register_whatif(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "whatif", "Compare the best plan under a base and named variations (scenarios YAML)");
  static std::string file, out;
  static int threads = 0;
  static double train_tokens = 0;
  cmd->add_option("scenarios", file, "Scenarios YAML (docs/file-formats.md)")->required();
  cmd->add_option("--out,-o", out,
                  "Write the study to this file: .html or .md (default: Markdown on stdout)");
  cmd->add_option("--threads", threads, "Search threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--train-tokens", train_tokens,
                  "Tokens to train: each scenario's time to train (days); replaces every "
                  "scenario's train_tokens in the file")
      ->check(finite_range(1.0, 1e18));
  cmd->callback([&ctx] {
    const reports::Format format =
        out.empty() ? reports::Format::kMarkdown : reports::format_from_path(out, "--out");
    reports::ScenarioFile f = reports::load_scenarios(file);
    if (train_tokens > 0) {
      f.base.train_tokens = train_tokens;
      for (auto& v : f.variations) v.train_tokens.reset();  // every scenario trains as many
    }
    const reports::WhatifData data = reports::run_whatif(f, threads);
    // No scenario with a plan is no study: say why for each, write nothing, exit 2.
    int found = 0;
    for (const auto& c : data.columns) found += c.found ? 1 : 0;
    if (found == 0) {
      std::string why;
      for (const auto& c : data.columns) why += fmt::format("\n  {}: {}", c.name, c.top_rejection);
      throw InputError({file, 0, 0}, "", "no scenario has a feasible plan:" + why);
    }
    for (const auto& c : data.columns)
      if (!c.found)
        fmt::print(stderr, "dtplan: note: scenario '{}' has no feasible plan: {}\n", c.name,
                   c.top_rejection);
    const std::string text = reports::render_whatif(data, format);
    if (out.empty()) {
      fmt::print("{}", text);
    } else {
      write_file_atomic(out, text);
      fmt::print(stderr, "wrote {} ({} scenarios) in {:.2f} s\n", out, data.columns.size(),
                 data.generation_s);
    }
    ctx.exit_code = 0;
  });
}

}  // namespace dtplan::cli
