#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/hf_import.h"

namespace dtplan::cli {

void register_import_hf(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "import-hf",
      "Write a dtplan model YAML from a Hugging Face config.json (to stdout or --out)");
  static std::string path, out, name;
  cmd->add_option("config", path, "Path to config.json")->required();
  cmd->add_option("--out,-o", out, "Write the YAML to this file (atomically) instead of stdout");
  cmd->add_option("--name", name, "Model name (default: the folder or file stem)");
  cmd->callback([&ctx] {
    std::vector<std::string> notes;
    ModelSpec m = import_hf_config(path, name, &notes);
    for (const std::string& n : notes) fmt::print(stderr, "dtplan: note: {}\n", n);
    std::string yaml = model_to_yaml(m);
    if (out.empty()) {
      fmt::print("{}", yaml);
    } else {
      write_file_atomic(out, yaml);
      fmt::print(stderr, "wrote {}\n", out);
    }
    ctx.exit_code = 0;
  });
}

}  // namespace dtplan::cli
