// dtplan calibrate: measure GEMMs and collectives with a backend, fit, and write a calibrated
// hardware profile. Launched once per GPU by the cluster's launcher (mpirun / srun --mpi=pmix)
// or as one process.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "calibrate/driver.h"
#include "calibrate/process_group.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "core/error.h"
#include "core/registry.h"

namespace dtplan::cli {

void register_calibrate(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Measure GEMM and collective performance (cpu, cuda or replay backend), fit the cost "
      "model, and write a calibrated hardware profile");
  static calibrate::CalibrateOptions o;
  static std::string ops, sizes, precisions;
  cmd->add_option("--backend", o.backend, "cpu | cuda | replay (dtplan list backends)")
      ->capture_default_str();
  cmd->add_option("--profile", o.profile,
                  "base hardware profile (zoo name or path) whose datasheet values and "
                  "parameters the calibration refines")
      ->required();
  cmd->add_option("--out", o.out, "calibrated profile YAML to write")->required();
  cmd->add_option("--summary", o.summary, "Markdown summary (default: --out with .md)");
  cmd->add_option("--journal", o.journal, "measurement journal (default: --out + .journal)");
  cmd->add_flag("--resume", o.resume, "continue an interrupted run from its journal");
  cmd->add_flag("--quick", o.sweep.quick, "a reduced sweep (under a minute on the cpu backend)");
  cmd->add_option("--ops", ops,
                  "comma-separated subset: gemm, all_reduce, all_gather, reduce_scatter, "
                  "all_to_all, send_recv");
  cmd->add_option("--sizes", sizes,
                  "collective message sizes, e.g. 1K-64M (default 1K-1G; 1K-64M with --quick)");
  cmd->add_option("--precisions", precisions,
                  "GEMM precisions, e.g. bf16,fp8 (default: all the backend supports)");
  cmd->add_option(
         "--max-gemm-gflop", o.sweep.max_gemm_gflop,
         "skip GEMMs larger than this (default: none; on the cpu backend 20, 1 with --quick)")
      ->check(finite_range(1e-9, 1e18));
  cmd->add_option("--repeats", o.backend_options.repeats,
                  "timed repeats per measurement (cuda keeps the median; cpu the fastest of 3x as "
                  "many short ones)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--timeout-s", o.timeout_s,
                  "abort when one measurement, MPI start-up or a rank's arrival at a host "
                  "collective takes longer (a hung collective, a stopped rank)")
      ->check(finite_range(0.001, 1e6))
      ->capture_default_str();
  cmd->add_option("--input", o.backend_options.inputs,
                  "replay: recorded measurements (journal, CSV or nccl-tests -J JSON); repeatable");
  cmd->callback([&ctx] {
    o.sweep.ops.clear();
    if (!ops.empty()) {
      const std::vector<std::string> known = {"gemm",           "all_reduce", "all_gather",
                                              "reduce_scatter", "all_to_all", "send_recv"};
      std::string cur;
      for (size_t i = 0; i <= ops.size(); ++i) {
        if (i == ops.size() || ops[i] == ',') {
          if (std::find(known.begin(), known.end(), cur) == known.end())
            throw InputError(
                SourceLocation{}, "--ops",
                fmt::format("unknown operation '{}'{}", cur, did_you_mean(cur, known)));
          o.sweep.ops.push_back(cur);
          cur.clear();
        } else {
          cur += ops[i];
        }
      }
    }
    if (!sizes.empty()) {
      calibrate::parse_size_range(sizes, o.sweep.min_bytes, o.sweep.max_bytes);
      o.sweep.sizes_given = true;
    }
    o.sweep.precisions.clear();
    if (!precisions.empty()) {
      std::string cur;
      for (size_t i = 0; i <= precisions.size(); ++i) {
        if (i == precisions.size() || precisions[i] == ',') {
          auto p = parse_precision(cur);
          if (!p)
            throw InputError(
                SourceLocation{}, "--precisions",
                fmt::format("unknown precision '{}' (bf16, fp16, fp8, tf32, fp32)", cur));
          o.sweep.precisions.push_back(*p);
          cur.clear();
        } else {
          cur += precisions[i];
        }
      }
    }
    if (o.backend == "cpu" && o.sweep.max_gemm_gflop == 0)
      o.sweep.max_gemm_gflop = o.sweep.quick ? 1 : 20;  // host BLAS: keep each GEMM short
    if (!Registry<calibrate::ICalibrationBackend>::global().find(o.backend))
      throw InputError(
          SourceLocation{}, "--backend",
          fmt::format(
              "unknown backend '{}'{}", o.backend,
              did_you_mean(o.backend, Registry<calibrate::ICalibrationBackend>::global().names())));
    calibrate::ProcessGroup world(nullptr, nullptr, o.timeout_s);
    try {
      ctx.exit_code = calibrate::run_calibration(o, world);
    } catch (const InputError& e) {
      if (world.size() == 1) throw;
      fmt::print(stderr, "dtplan: error: {}: {}\n", world.where(), e.what());
      world.abort(2);
    } catch (const std::exception& e) {
      if (world.size() == 1) throw;
      fmt::print(stderr, "dtplan: internal error: {}: {}\n", world.where(), e.what());
      world.abort(1);
    }
  });
}

}  // namespace dtplan::cli
