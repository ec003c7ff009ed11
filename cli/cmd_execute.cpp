// dtplan execute: run a plan's step on real devices (one process per GPU under mpirun/srun),
// measured beside predicted (executor/runner.h; docs/executor.md).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <string>

#include "calibrate/process_group.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/search_options.h"
#include "core/atomic_file.h"
#include "core/catalog.h"
#include "core/error.h"
#include "executor/runner.h"
#include "reports/execute_report.h"

namespace dtplan::cli {
namespace {

// The error as one rank of many reports it: prefixed with the rank and host, unless the message
// already names them (most of the executor's do).
std::string located(const calibrate::ProcessGroup& world, const std::string& message) {
  const std::string at = world.where();
  return message.find(at) == std::string::npos ? at + ": " + message : message;
}

}  // namespace

void register_execute(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "execute",
      "Run a plan's step on real devices, one process per GPU (mpirun/srun), and put measured "
      "beside predicted");
  static SpecOptions spec;
  static PlanOptions plan;
  static exec::ExecOptions o;
  static bool json = false;
  static std::string update_profile, ranks, out;
  add_spec_options(*cmd, spec);
  add_plan_options(*cmd, plan);
  cmd->add_option("--backend", o.backend,
                  "cpu: host BLAS and MPI at scaled-down shapes (no GPU needed); cuda: cuBLASLt "
                  "and NCCL on the GPUs (dtplan list executors)")
      ->capture_default_str();
  cmd->add_option("--scale", o.scale,
                  "Divide the model's hidden size, FFN widths, heads and vocabulary by this "
                  "(head width and sequence kept) before running; default: the backend's (cpu "
                  "16, cuda 1)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--steps", o.steps,
                  "Steps to run (each barrier to barrier; the last is reported)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--timeout-s", o.timeout_s,
                  "End the run when one op, or a rank's arrival at a step, takes longer (a dead "
                  "or stopped peer); the stalled op, its group and host are named")
      ->check(finite_range(0.001, 1e6))
      ->capture_default_str();
  cmd->add_option("--ranks", ranks,
                  "Run only these of the plan's GPUs (e.g. 0-7: one node's, or 0: one GPU), one "
                  "process each; collectives and transfers with a peer outside them become waits "
                  "of the model's time (said in the output)");
  cmd->add_flag("--empty-ops", o.empty_ops,
                "Run the orchestration only, every op skipped: the executor's own cost");
  cmd->add_option("--op-log", o.op_log_dir,
                  "Write each rank's executed instructions, in order, to DIR/rank-N.log");
  cmd->add_option("--update-profile", update_profile,
                  "Fold the measured GEMM and collective times into a calibrated profile written "
                  "here (the calibrator's fits and format: docs/calibration.md)");
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->add_option("--out", out,
                  "Also write the validation report here: FILE.html or FILE.md (measured beside "
                  "predicted, how it ran, the source JSON)");
  cmd->callback([&ctx] {
    std::vector<Violation> violations;
    Resolved r = resolve(spec, plan, violations);
    if (report_violations(violations)) {
      ctx.exit_code = 2;
      return;
    }
    // Output paths are checked before anything runs.
    const reports::Format format =
        out.empty() ? reports::Format::kMarkdown : reports::format_from_path(out, "--out");
    o.ranks.clear();
    if (!ranks.empty()) o.ranks = parse_int_set(ranks, "--ranks", 1 << 21, /*positive=*/false);
    calibrate::ProcessGroup world(nullptr, nullptr, o.timeout_s);
    exec::ExecResult res;
    try {
      res = exec::execute(r.model, r.cluster, r.workload, r.plan, o, world);
    } catch (const InputError& e) {
      if (world.size() == 1) throw;
      fmt::print(stderr, "dtplan: error: {}\n", located(world, e.what()));
      world.abort(2);
    } catch (const std::exception& e) {
      if (world.size() == 1) throw;
      fmt::print(stderr, "dtplan: internal error: {}\n", located(world, e.what()));
      world.abort(1);
    }
    if (!world.is_root()) return;
    if (json)
      fmt::print("{}\n", reports::execute_json(res, r.plan));
    else
      fmt::print("{}", reports::execute_text(res, r.plan));
    if (!out.empty()) {
      write_file_atomic(out, reports::render_execute(res, r.plan, format));
      fmt::print(stderr, "dtplan execute: report written to {}\n", out);
    }
    if (!update_profile.empty()) {
      exec::write_updated_profile(res, resolve_profile_path(spec.cluster), r.cluster.profile,
                                  update_profile);
      fmt::print(stderr, "dtplan execute: calibrated profile written to {}\n", update_profile);
    }
  });
}

}  // namespace dtplan::cli
