#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/estimate_json.h"
#include "cli/framework_check.h"
#include "cli/options.h"
#include "core/atomic_file.h"
#include "simulator/des/step_sim.h"

namespace dtplan::cli {

void register_simulate(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "simulate",
      "Simulate one step as discrete events (pipeline schedule, sends over shared links)");
  static SpecOptions spec;
  static PlanOptions plan;
  static bool json = false;
  static std::string trace, contention = "on", ranks = "stage", framework;
  add_spec_options(*cmd, spec);
  add_plan_options(*cmd, plan);
  add_resilience_options(*cmd, spec);
  add_framework_option(*cmd, framework);
  cmd->add_flag("--json", json, "Machine-readable output (the estimate's fields)");
  cmd->add_option("--trace", trace, "Write a Chrome/Perfetto trace (open in ui.perfetto.dev)")
      ->check([](const std::string& v) { return v.empty() ? "needs a file name" : ""; });
  cmd->add_option("--contention", contention,
                  "on: concurrent transfers (pipeline sends, data-parallel reductions) share "
                  "link bandwidth (max-min fair) and communication slows concurrent compute "
                  "(the profile's comm_compute_slowdown); off: every transfer runs as if alone")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--ranks", ranks,
                  "stage: one representative rank per pipeline stage (its data- and "
                  "tensor-parallel peers are identical); all: every GPU, each on its own links "
                  "(studies up to 16384 GPUs)")
      ->check(CLI::IsMember({"stage", "all"}))
      ->capture_default_str();
  cmd->footer(
      "With no model, cluster or plan flag, simulates the built-in example: GPT-3 175B on 32 "
      "DGX A100 80GB nodes, TP8 PP8 SP, selective recompute, distributed optimizer, gbs 1536.");
  cmd->callback([&ctx, cmd] {
    if (!any_option_given(*cmd, {"--json", "--trace", "--contention", "--ranks", "--framework",
                                 "--loader-tokens-per-s-per-node", "--async-save", "--restart-s",
                                 "--checkpoint-interval-s", "--skipped-steps"})) {
      apply_builtin_defaults(spec, plan);
      fmt::print(stderr,
                 "dtplan simulate: no model, cluster or plan given; using the built-in example "
                 "(see --help)\n");
    }
    std::vector<Violation> violations;
    Resolved r = resolve(spec, plan, violations);
    if (report_violations(violations)) {
      ctx.exit_code = 2;
      return;
    }
    const FrameworkCheck fw = check_framework(framework, r.plan);
    throw_if_refused(fw);
    des::StepSimResult s = des::simulate_step(r.model, r.cluster, r.workload, r.plan,
                                              contention == "on", !trace.empty(), ranks == "all");
    if (!trace.empty()) {
      const std::string json_text = des::trace_json(s.trace, s.ranks, s.gpus, r.plan.pp);
      write_file_atomic(trace, json_text);
      const double mb = static_cast<double>(json_text.size()) / 1e6;
      fmt::print(stderr, "wrote {} ({}){}\n", trace,
                 mb < 1 ? fmt::format("{:.0f} kB", mb * 1e3) : fmt::format("{:.1f} MB", mb),
                 mb > 100 ? "; large traces load slowly in ui.perfetto.dev (--ranks stage "
                            "writes one process per stage)"
                          : "");
    }
    if (json) {
      auto j = estimate_to_json(r, s.estimate, FlopsConvention::kCausalHalf);
      j["evaluator"] = "des";
      j["analytic_step_time_s"] = s.analytic_step_s;
      j["simulated_events"] = s.events;
      j["simulated_ranks"] = s.ranks;
      j["rank_set"] = ranks;  // --ranks: stage or all
      j["contention"] = contention == "on";
      // Per stage: activations alive at once in the timeline vs the schedule's statement.
      auto stages = nlohmann::json::array();
      for (size_t i = 0; i < s.peak_memory_bytes.size(); ++i)
        stages.push_back({{"stage", i},
                          {"peak_inflight_microbatches", s.peak_inflight_microbatches[i]},
                          {"schedule_inflight_microbatches", s.schedule_inflight_microbatches[i]},
                          {"peak_memory_gib", s.peak_memory_bytes[i] / (1024.0 * 1024 * 1024)}});
      j["simulated_memory"] = stages;
      j["framework"] = framework_to_json(fw);
      j["warnings"] = warnings_to_json(fw);
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print("{}", estimate_to_text(r, s.estimate, FlopsConvention::kCausalHalf));
      fmt::print(
          "\nsimulated {} events on {} rank(s){}; closed-form step time {:.3f} s (the simulated "
          "step is {:+.2f}% against it)\n",
          s.events, s.ranks, ranks == "all" ? " (every GPU)" : " (one per stage)",
          s.analytic_step_s,
          100 * (s.estimate.step_time_s - s.analytic_step_s) / s.analytic_step_s);
      fmt::print(
          "\nlive activations in the timeline (micro-batches held at once) and peak memory:\n");
      fmt::print("  {:>5} {:>10} {:>10} {:>12}\n", "stage", "simulated", "schedule", "peak GiB");
      for (size_t i = 0; i < s.peak_memory_bytes.size(); ++i)
        fmt::print("  {:>5} {:>10.2f} {:>10.2f} {:>12.2f}\n", i, s.peak_inflight_microbatches[i],
                   s.schedule_inflight_microbatches[i],
                   s.peak_memory_bytes[i] / (1024.0 * 1024 * 1024));
      fmt::print("{}", framework_to_text(fw));
    }
    ctx.exit_code = 0;
  });
}

}  // namespace dtplan::cli
