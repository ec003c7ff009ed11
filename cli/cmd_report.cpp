#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>

#include "cli/commands.h"
#include "cli/search_options.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"
#include "reports/renderers.h"
#include "reports/report_builder.h"

namespace dtplan::cli {

void register_report(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "report",
      "Write a capacity report (HTML or Markdown) from a search: ranked plans, charts, "
      "derivations, alternatives");
  static SearchFlags flags;
  static std::string out, from;
  static bool no_alternatives = false;
  add_search_flags(*cmd, flags);
  cmd->add_option("--out,-o", out, "The report file: .html (self-contained) or .md (Markdown)")
      ->required();
  cmd->add_option("--from", from,
                  "Run the search a saved `dtplan search --json` file ran (its model, cluster, "
                  "workload and pins) instead of the flags");
  cmd->add_flag("--no-alternatives", no_alternatives,
                "Skip the per-dimension alternatives and the TP x PP heatmap (faster)");
  cmd->footer(
      "With no model or cluster flag and no --from, reports on the built-in example: GPT-3 175B "
      "on 32 DGX A100 80GB nodes (256 GPUs), batch 1536 x 2048 tokens.");
  cmd->callback([&ctx, cmd] {
    const reports::Format format = reports::format_from_path(out, "--out");
    nlohmann::json saved;
    if (!from.empty()) {
      if (!no_spec_given(*cmd))
        throw InputError({}, "--from",
                         "takes the model, cluster and pins from the file; drop --model, "
                         "--cluster and --gpus");
      const int threads = flags.threads;
      const SpecOptions given = flags.spec;
      flags = search_flags_from_json(from);
      flags.threads = threads;
      // Checkpoint and failure flags do not change the search: given here, they price the
      // report's job instead of the recorded ones.
      keep_given_resilience_flags(*cmd, given, flags.spec);
      saved = nlohmann::json::parse(read_input_file(from, "--from"), nullptr, false);
    } else if (no_spec_given(*cmd)) {
      apply_builtin_example(flags);
      fmt::print(stderr,
                 "dtplan report: no model or cluster given; using the built-in example (see "
                 "--help)\n");
    }
    if (flags.budget_gpu_hours > 0)
      throw InputError({}, "--budget-gpu-hours",
                       "applies to `dtplan search` (the answer's GPU count can then be reported "
                       "with --gpus)");
    if (flags.deadline_days > 0)
      throw InputError({}, "--deadline-days",
                       "applies to `dtplan search` (the answer's GPU count can then be reported "
                       "with --gpus)");
    SearchSetup setup = make_search_setup(flags);
    if (setup.cluster.heterogeneous())
      throw InputError({}, "--cluster",
                       fmt::format("{} has device groups: reports derive every number from one "
                                   "GPU's profile and take homogeneous clusters only (search, "
                                   "estimate and simulate take heterogeneous ones)",
                                   setup.cluster.file));
    const bool distinct = distinct_ranking(flags);
    if (distinct) widen_for_distinct(setup, flags);
    SearchResult r = search(setup.model, setup.cluster, setup.workload, setup.space, setup.options,
                            AnalyticEvaluator{});
    if (setup.space.gbs.size() > 1 && !r.top.empty()) {
      // A report compares plans of one batch (step times, heatmap, alternatives): the one the
      // search ranked first per token.
      const int64_t best = r.top.front().plan.gbs;
      fmt::print(stderr,
                 "dtplan report: {} global batches searched; the report is for the best per "
                 "token, {} sequences\n",
                 setup.space.gbs.size(), best);
      setup.space.gbs = {best};
      setup.workload.global_batch = best;
      r = search(setup.model, setup.cluster, setup.workload, setup.space, setup.options,
                 AnalyticEvaluator{});
    }
    if (distinct) distinct_layouts_first(r, static_cast<size_t>(flags.top));
    nlohmann::json source = search_to_json(flags, setup, r, "analytic", 0);
    if (!from.empty() && saved.is_object()) {
      // The saved ranking should be what the search gives again; say so when it is not (the
      // model, profile or dtplan changed since it was saved).
      const auto& top = saved["top"];
      const bool same =
          top.is_array() && !top.empty() && !r.top.empty() && top[0].contains("step_time_s") &&
          std::fabs(top[0]["step_time_s"].get<double>() - r.top.front().estimate.step_time_s) <=
              1e-9 * r.top.front().estimate.step_time_s;
      if (!same)
        fmt::print(stderr,
                   "dtplan report: note: the search from {} ranks differently now (files or "
                   "dtplan changed since it was saved); the report shows the new ranking\n",
                   from);
      source = saved;
    }
    reports::ReportOptions ropt;
    ropt.alternatives = ropt.heatmap = !no_alternatives;
    ropt.failure = setup.failure;
    ropt.framework_stack = setup.framework_stack;
    const reports::ReportData data = reports::build_report(
        setup.model, setup.cluster, setup.workload, setup.space, setup.options, r,
        source.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", ropt);
    write_file_atomic(out, reports::render_report(data, format));
    fmt::print(stderr, "wrote {} ({} ranked plans, {} alternatives) in {:.2f} s\n", out,
               data.top.size(), data.alternatives.size(), r.elapsed_s + data.generation_s);
    if (r.top.empty()) fmt::print(stderr, "dtplan report: no plan fits; the report says why\n");
    ctx.exit_code = r.top.empty() ? 2 : 0;
  });
}

}  // namespace dtplan::cli
