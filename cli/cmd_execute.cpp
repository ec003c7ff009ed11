// dtplan execute: run a plan's step on real devices (one process per GPU under mpirun/srun),
// measured beside predicted (executor/runner.h; docs/executor.md).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "calibrate/process_group.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/search_options.h"
#include "core/catalog.h"
#include "core/error.h"
#include "executor/runner.h"

namespace dtplan::cli {

namespace {

struct ClassRow {
  const char* name;
  double measured_s, predicted_s;
  int count;
};

// Per op class, the mean over ranks of the last step's time.
std::vector<ClassRow> class_rows(const exec::ExecResult& r) {
  std::vector<ClassRow> rows;
  const double n = std::max<size_t>(1, r.per_rank.size());
  for (int k = 0; k < exec::kNumOpClasses; ++k) {
    ClassRow row{to_string(static_cast<exec::OpClass>(k)), 0, 0, 0};
    for (const auto& pr : r.per_rank) {
      row.measured_s += pr.classes.measured_s[k] / n;
      row.predicted_s += pr.classes.predicted_s[k] / n;
      row.count += pr.classes.count[k];
    }
    if (row.count > 0) rows.push_back(row);
  }
  return rows;
}

// The classes whose measured time differs most from predicted, in seconds per rank.
std::vector<ClassRow> discrepancies(std::vector<ClassRow> rows) {
  std::sort(rows.begin(), rows.end(), [](const ClassRow& a, const ClassRow& b) {
    return std::abs(a.measured_s - a.predicted_s) > std::abs(b.measured_s - b.predicted_s);
  });
  if (rows.size() > 3) rows.resize(3);
  return rows;
}

std::string ratio(double measured, double predicted) {
  return predicted > 0 ? fmt::format("{:.2f}x", measured / predicted) : "-";
}

nlohmann::json to_json(const exec::ExecResult& r, const Plan& p) {
  nlohmann::json j;
  j["backend"] = r.backend;
  j["device"] = r.device;
  j["software"] = r.software;
  j["model"] = r.model.name;
  j["scale"] = r.scale;
  j["plan"] = p.describe();
  j["ranks"] = r.ranks;
  j["plan_ranks"] = r.plan_ranks;
  j["notes"] = r.notes;
  j["measured"] = {{"step_time_s", r.measured_step_s},
                   {"peak_memory_bytes", r.measured_peak_bytes}};
  j["predicted"] = {{"step_time_s", r.predicted_step_s},
                    {"step_time_simulated_s", r.predicted_step_sim_s},
                    {"peak_memory_bytes", r.predicted_peak_bytes}};
  j["op_classes"] = nlohmann::json::array();
  for (const auto& c : class_rows(r))
    j["op_classes"].push_back({{"name", c.name},
                               {"measured_s", c.measured_s},
                               {"predicted_s", c.predicted_s},
                               {"ops", c.count}});
  j["largest_discrepancies"] = nlohmann::json::array();
  for (const auto& c : discrepancies(class_rows(r))) j["largest_discrepancies"].push_back(c.name);
  // Per GEMM shape (per GPU, after sharding), every rank's calls: the time of one call.
  j["gemm_shapes"] = nlohmann::json::array();
  for (const auto& g : r.gemm_shapes)
    j["gemm_shapes"].push_back({{"m", g.m},
                                {"n", g.n},
                                {"k", g.k},
                                {"copies", g.count},
                                {"calls", g.calls},
                                {"measured_s_per_call", g.measured_s / g.calls},
                                {"predicted_s_per_call", g.predicted_s / g.calls}});
  j["per_rank"] = nlohmann::json::array();
  for (const auto& pr : r.per_rank) {
    nlohmann::json q;
    q["rank"] = pr.rank;
    q["stage"] = pr.stage;
    q["host"] = pr.host;
    q["step_s"] = pr.step_s;
    q["peak_memory_bytes"] = pr.peak_bytes;
    q["predicted_peak_memory_bytes"] = pr.predicted_peak_bytes;
    q["instructions"] = pr.instructions;
    q["modelled_ops"] = pr.modelled_ops;
    q["modelled_s"] = pr.modelled_s;
    q["op_classes"] = nlohmann::json::array();
    for (int k = 0; k < exec::kNumOpClasses; ++k)
      if (pr.classes.count[k] > 0)
        q["op_classes"].push_back({{"name", to_string(static_cast<exec::OpClass>(k))},
                                   {"measured_s", pr.classes.measured_s[k]},
                                   {"predicted_s", pr.classes.predicted_s[k]},
                                   {"ops", pr.classes.count[k]}});
    j["per_rank"].push_back(q);
  }
  return j;
}

void print_text(const exec::ExecResult& r, const Plan& p) {
  const double gb = 1e9;
  fmt::print("dtplan execute: {} on {} of the plan's {} GPU(s), backend {} ({})\n", r.model.name,
             r.ranks, r.plan_ranks, r.backend, r.device);
  fmt::print("plan: {}\n\n", p.describe());
  fmt::print("{:<14} {:>12} {:>14} {:>8}\n", "", "measured", "predicted", "ratio");
  fmt::print("{:<14} {:>10.4f} s {:>12.4f} s {:>8}   (closed form; simulated {:.4f} s)\n",
             "step time", r.measured_step_s, r.predicted_step_s,
             ratio(r.measured_step_s, r.predicted_step_s), r.predicted_step_sim_s);
  fmt::print("{:<14} {:>9.3f} GB {:>11.3f} GB {:>8}\n\n", "peak memory", r.measured_peak_bytes / gb,
             r.predicted_peak_bytes / gb, ratio(r.measured_peak_bytes, r.predicted_peak_bytes));
  fmt::print("per op class, mean over ranks of the last step:\n");
  fmt::print("  {:<12} {:>7} {:>12} {:>12} {:>8}\n", "class", "ops", "measured s", "predicted s",
             "ratio");
  for (const auto& c : class_rows(r))
    fmt::print("  {:<12} {:>7} {:>12.5f} {:>12.5f} {:>8}\n", c.name, c.count, c.measured_s,
               c.predicted_s, ratio(c.measured_s, c.predicted_s));
  std::string worst;
  for (const auto& c : discrepancies(class_rows(r)))
    worst += fmt::format("{}{} ({:+.4f} s)", worst.empty() ? "" : ", ", c.name,
                         c.measured_s - c.predicted_s);
  fmt::print("largest discrepancies: {}\n\n", worst);
  fmt::print("GEMM shapes by measured time (per GPU; one call, every rank's calls):\n");
  fmt::print("  {:>22} {:>6} {:>13} {:>13} {:>8}\n", "M x N x K (copies)", "calls", "measured ms",
             "predicted ms", "ratio");
  for (size_t i = 0; i < r.gemm_shapes.size() && i < 8; ++i) {
    const auto& g = r.gemm_shapes[i];
    fmt::print("  {:>22} {:>6} {:>13.4f} {:>13.4f} {:>8}\n",
               fmt::format("{}x{}x{} ({})", g.m, g.n, g.k, g.count), g.calls,
               1e3 * g.measured_s / g.calls, 1e3 * g.predicted_s / g.calls,
               ratio(g.measured_s, g.predicted_s));
  }
  fmt::print("\nper rank:\n");
  fmt::print("  {:>4} {:>5} {:>12} {:>12} {:>14} {:>16}\n", "rank", "stage", "step s", "peak GB",
             "predicted GB", "modelled ops (s)");
  for (const auto& pr : r.per_rank)
    fmt::print("  {:>4} {:>5} {:>12.4f} {:>12.3f} {:>14.3f} {:>16}\n", pr.rank, pr.stage,
               pr.step_s.empty() ? 0.0 : pr.step_s.back(), pr.peak_bytes / gb,
               pr.predicted_peak_bytes / gb,
               fmt::format("{} ({:.4f})", pr.modelled_ops, pr.modelled_s));
  fmt::print("\nhow it ran:\n");
  for (const auto& n : r.notes) fmt::print("  - {}\n", n);
  fmt::print("  - software: {}\n", r.software);
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
  static std::string update_profile, ranks;
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
  cmd->callback([&ctx] {
    std::vector<Violation> violations;
    Resolved r = resolve(spec, plan, violations);
    if (report_violations(violations)) {
      ctx.exit_code = 2;
      return;
    }
    o.ranks.clear();
    if (!ranks.empty()) o.ranks = parse_int_set(ranks, "--ranks", 1 << 21, /*positive=*/false);
    calibrate::ProcessGroup world(nullptr, nullptr, o.timeout_s);
    exec::ExecResult res;
    try {
      res = exec::execute(r.model, r.cluster, r.workload, r.plan, o, world);
    } catch (const InputError& e) {
      if (world.size() == 1) throw;
      fmt::print(stderr, "dtplan: error: {}: {}\n", world.where(), e.what());
      world.abort(2);
    } catch (const std::exception& e) {
      if (world.size() == 1) throw;
      fmt::print(stderr, "dtplan: internal error: {}: {}\n", world.where(), e.what());
      world.abort(1);
    }
    if (!world.is_root()) return;
    if (json)
      fmt::print("{}\n", to_json(res, r.plan).dump(2));
    else
      print_text(res, r.plan);
    if (!update_profile.empty()) {
      exec::write_updated_profile(res, resolve_profile_path(spec.cluster), r.cluster.profile,
                                  update_profile);
      fmt::print(stderr, "dtplan execute: calibrated profile written to {}\n", update_profile);
    }
  });
}

}  // namespace dtplan::cli
