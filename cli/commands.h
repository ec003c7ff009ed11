// Each subcommand registers itself on the app; the callback runs the command and returns the
// exit code through `exit_code`.
#pragma once

namespace CLI {
class App;
}

namespace dtplan::cli {

struct CommandContext {
  int exit_code = 0;
};

void register_list(CLI::App& app, CommandContext& ctx);
void register_import_hf(CLI::App& app, CommandContext& ctx);
void register_check(CLI::App& app, CommandContext& ctx);
void register_estimate(CLI::App& app, CommandContext& ctx);
void register_accuracy(CLI::App& app, CommandContext& ctx);
void register_search(CLI::App& app, CommandContext& ctx);
void register_launch(CLI::App& app, CommandContext& ctx);
void register_simulate(CLI::App& app, CommandContext& ctx);
void register_calibrate(CLI::App& app, CommandContext& ctx);
void register_report(CLI::App& app, CommandContext& ctx);
void register_whatif(CLI::App& app, CommandContext& ctx);
void register_collective(CLI::App& app, CommandContext& ctx);
void register_rl(CLI::App& app, CommandContext& ctx);
void register_execute(CLI::App& app, CommandContext& ctx);

}  // namespace dtplan::cli
