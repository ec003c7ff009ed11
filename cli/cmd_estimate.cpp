#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/estimate_json.h"
#include "cli/framework_check.h"
#include "cli/options.h"
#include "core/atomic_file.h"
#include "reports/uncertainty.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/calibration_coverage.h"

namespace dtplan::cli {

void register_estimate(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("estimate",
                                 "Predict step time, its breakdown, MFU and memory of one plan");
  static SpecOptions spec;
  static PlanOptions plan;
  static bool json = false, ops = false;
  static std::string out, convention = "causal-half", framework;
  add_spec_options(*cmd, spec);
  add_plan_options(*cmd, plan);
  add_resilience_options(*cmd, spec);
  add_framework_option(*cmd, framework);
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->add_flag("--ops", ops,
                "Also list every op of one micro-batch with its shape, time, share of the peak "
                "and launch time (JSON: \"ops\")");
  cmd->add_option("--out,-o", out, "Write the output to this file (atomically)");
  cmd->add_option("--flops-convention", convention,
                  "causal-half (Megatron HEAD) or full-attention (papers, Megatron < 2026)")
      ->check(CLI::IsMember({"causal-half", "full-attention"}))
      ->capture_default_str();
  cmd->footer(
      "With no model, cluster or plan flag, estimates the built-in example: GPT-3 175B on 32 "
      "DGX A100 80GB nodes, TP8 PP8 SP, selective recompute, distributed optimizer, gbs 1536.");
  cmd->callback([&ctx, cmd] {
    if (!any_option_given(*cmd, {"--json", "--ops", "--out", "--flops-convention", "--framework",
                                 "--loader-tokens-per-s-per-node", "--async-save", "--restart-s",
                                 "--checkpoint-interval-s", "--skipped-steps",
                                 "--straggler-fraction", "--straggler-factor"})) {
      apply_builtin_defaults(spec, plan);
      fmt::print(stderr,
                 "dtplan estimate: no model, cluster or plan given; using the built-in "
                 "example (see --help)\n");
    }
    std::vector<Violation> violations;
    Resolved r = resolve(spec, plan, violations);
    if (report_violations(violations)) {
      ctx.exit_code = 2;
      return;
    }
    const FrameworkCheck fw = select_framework(framework, *cmd, r);
    throw_if_refused(fw);
    EstimatorOptions opt;
    opt.flops = convention == "full-attention" ? FlopsConvention::kFullAttention
                                               : FlopsConvention::kCausalHalf;
    CalibrationCoverage coverage;
    Estimate e;
    {
      CoverageScope scope(coverage);
      e = estimate(r.model, r.cluster, r.workload, r.plan, opt);
    }
    const std::vector<std::string> flags = coverage.warnings();
    // The warnings that travel with the numbers: the framework's, then the plan's and how sure
    // they are.
    const std::vector<NumberWarning> warnings = step_warnings(r, e, flags);
    std::string text;
    if (json) {
      nlohmann::json j = estimate_to_json(r, e, opt.flops);
      j["calibration_warnings"] = flags;
      j["framework"] = framework_to_json(fw);
      j["warnings"] = warnings_to_json(fw);
      append_warnings(j["warnings"], warnings);
      if (ops) j["ops"] = ops_to_json(r);
      text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    } else {
      text = estimate_to_text(r, e, opt.flops) + framework_to_text(fw);
      if (ops) text += ops_to_text(r);
      text += warnings_to_text(warnings, flags, r.cluster.profile.name);
    }
    write_output(text, out);
    ctx.exit_code = 0;
  });
}

}  // namespace dtplan::cli
