// dtplan rl: plan an RL post-training step (docs/rl.md).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "planner/rl.h"
#include "reports/rl_report.h"

namespace dtplan::cli {

namespace {

std::string phase_table(const rl::RlResult& r) {
  std::string o =
      fmt::format("{:<12} {:>10} {:>7} {:>14}\n", "phase", "seconds", "share", "GPU-hours/step");
  for (size_t i = 0; i < r.phases_s.size(); ++i) {
    const auto& [n, s] = r.phases_s[i];
    if (s <= 0) continue;
    o += fmt::format("{:<12} {:>10.1f} {:>6.1f}% {:>14.3g}\n", n, s, 100 * s / r.step_time_s,
                     r.gpu_seconds[i].second / 3600);
  }
  return o;
}

std::string describe(const rl::RlResult& r) {
  std::string o;
  o += fmt::format("architecture {}: step {:.1f} s, staleness {:.3g} steps\n",
                   rl::to_string(r.architecture), r.step_time_s, r.staleness_steps);
  if (r.architecture == rl::Architecture::kColocated)
    o += fmt::format("  {} GPUs shared: rollout {} x {} replicas, training {}\n", r.rollout_gpus,
                     rl::rollout_layout(r), r.rollout_replicas, r.training_plan.describe());
  else
    o += fmt::format("  rollout {} GPUs ({} x {} replicas), training {} GPUs ({})\n",
                     r.rollout_gpus, rl::rollout_layout(r), r.rollout_replicas, r.training_gpus,
                     r.training_plan.describe());
  o += phase_table(r);
  if (r.architecture == rl::Architecture::kOneStepOff ||
      r.architecture == rl::Architecture::kFullyAsync)
    o += "(the pools work at once: each phase's share is of the step it overlaps)\n";
  if (r.architecture != rl::Architecture::kColocated)
    o += fmt::format("idle share: rollout pool {:.1f}%, training pool {:.1f}%\n",
                     100 * r.idle_share_rollout, 100 * r.idle_share_training);
  o += fmt::format("weight sync: {:.1f} GiB in {:.3g} s every {} step(s), {:.3g} s exposed; {}\n",
                   r.sync_bytes / (1 << 30), r.sync_time_s, r.sync_interval_steps, r.sync_exposed_s,
                   r.sync_how);
  if (r.architecture == rl::Architecture::kFullyAsync)
    o += fmt::format(
        "over the step: generation {:.0f} response tokens/s (streaming: {:.0f} sequences per "
        "replica, a response's mean latency {:.1f} s); training {:.0f} tokens/s\n",
        r.generation_tokens_per_s, r.generation.streaming_batch, r.generation.streaming_latency_s,
        r.training_tokens_per_s);
  else
    o += fmt::format(
        "over the step: generation {:.0f} response tokens/s, training {:.0f} tokens/s (a "
        "step's tokens / the step time); longest response {:.0f} tokens, {:.1f} s of "
        "generation with under half the peak batch\n",
        r.generation_tokens_per_s, r.training_tokens_per_s, r.generation.longest_tokens,
        r.generation.tail_s);
  for (const auto& n : r.notes) o += "note: " + n + "\n";
  return o;
}

int run_validation(const std::string& file, bool json, int threads) {
  const std::vector<rl::RlCase> cases = rl::load_rl_cases(file);
  nlohmann::json j = nlohmann::json::array();
  double sum_abs = 0;
  int n = 0, within = 0;
  if (!json)
    fmt::print("{:<44} {:<17} {:>10} {:>10} {:>8}\n", "case", "quantity", "measured", "predicted",
               "error");
  for (const auto& c : cases) {
    const rl::RlCaseResult r = rl::evaluate_case(c, threads);
    nlohmann::json x = {{"id", c.id},
                        {"quantity", rl::to_string(c.quantity)},
                        {"measured", c.measured},
                        {"source", c.source},
                        {"assumed", c.assumed},
                        {"predicted", r.predicted}};
    if (r.predicted) {
      const double err = (r.value - c.measured) / c.measured;
      sum_abs += std::abs(err);
      ++n;
      within += std::abs(err) <= 0.2 ? 1 : 0;
      x["value"] = r.value;
      x["error"] = err;
      x["detail"] = r.detail;
      if (!json)
        fmt::print("{:<44} {:<17} {:>10.3g} {:>10.3g} {:>+7.1f}%\n", c.id,
                   rl::to_string(c.quantity), c.measured, r.value, 100 * err);
    } else {
      x["why"] = r.why;
      if (!json)
        fmt::print("{:<44} {:<17} {:>10.3g} {:>10} ({})\n", c.id, rl::to_string(c.quantity),
                   c.measured, "-", r.why);
    }
    j.push_back(x);
  }
  const double mape = n > 0 ? sum_abs / n : 0;
  if (json) {
    nlohmann::json o = {{"cases", j},
                        {"predicted", n},
                        {"total", cases.size()},
                        {"mape", mape},
                        {"within_20_percent", within}};
    fmt::print("{}\n", o.dump(2));
  } else {
    fmt::print("{} of {} predicted, MAPE {:.1f}%, {} within 20%\n", n, cases.size(), 100 * mape,
               within);
  }
  return n > 0 ? 0 : 2;
}

}  // namespace

void register_rl(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "rl",
      "Plan an RL post-training step: rollout vs training, colocated vs disaggregated, "
      "weight sync, staleness (docs/rl.md)");
  static std::string config, out, validate;
  static bool search = false, json = false;
  static int threads = 0;
  auto* config_opt = cmd->add_option("--config,-c", config, "RL configuration YAML (docs/rl.md)");
  cmd->add_option("--validate", validate,
                  "Published measurements with their configurations (examples/rl/published.yaml): "
                  "measured beside predicted")
      ->excludes(config_opt);
  cmd->add_flag("--search", search,
                "Search every architecture, rollout-pool size and rollout layout, each with its "
                "best training layout (a what-if variation keeps what it sets itself)");
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->add_option("--out,-o", out, "Write a report: .html or .md");
  cmd->add_option("--threads", threads, "Search threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->callback([&ctx] {
    if (!validate.empty()) {
      ctx.exit_code = run_validation(validate, json, threads);
      return;
    }
    if (config.empty())
      throw InputError({}, "--config", "give an RL configuration YAML (or --validate FILE)");
    const bool report = !out.empty();
    const reports::Format format =
        report ? reports::format_from_path(out, "--out") : reports::Format::kMarkdown;
    rl::RlFile f = rl::load_rl_file(config);
    // Without --search: the file's architecture and pool size, every architecture where it
    // says `architecture: search` (colocated where it names none); what it leaves open
    // (rollout_gpus, rollout tp) is chosen. With --search: every architecture, pool size and
    // rollout TP, whatever the file fixes.
    // A variation keeps what it sets itself (its architecture, pool size, rollout settings).
    auto settle = [](rl::RlConfig& c, const std::vector<std::string>& fixed) {
      auto sets = [&](const char* k) {
        return std::find(fixed.begin(), fixed.end(), k) != fixed.end();
      };
      if (search) {
        if (!sets("architecture")) c.architecture.reset();
        if (!sets("rollout_gpus")) c.rollout_gpus = 0;
        if (!sets("rollout")) c.rollout_tp = 0;
      } else if (!c.architecture && !c.architecture_search) {
        c.architecture = rl::Architecture::kColocated;
      }
    };
    settle(f.base, {});
    for (auto& v : f.whatif) settle(v.config, v.keys);
    reports::RlReportData d;
    d.title = f.base.title;
    d.config_file = config;
    d.policy = f.base.policy.display_name.empty() ? f.base.policy.name : f.base.policy.display_name;
    d.cluster = f.base.cluster.profile.gpu.name;
    d.gpus = f.base.cluster.num_gpus;
    d.searched = search || f.base.architecture_search;
    if (!search && !f.base.architecture_was_set && !f.base.architecture_search)
      fmt::print(stderr,
                 "dtplan rl: no architecture fixed and no --search: the colocated plan; pass "
                 "--search to compare the architectures\n");
    d.result = rl::search_rl(f.base, threads);
    for (auto& v : f.whatif) {
      reports::RlReportData::Variation x;
      x.name = v.name;
      try {
        x.best = rl::search_rl(v.config, threads).best;
        x.found = true;
      } catch (const InputError& e) {
        x.why = e.reason();
      }
      d.whatif.push_back(std::move(x));
    }
    if (report) {
      write_file_atomic(out, reports::render_rl(d, format));
      fmt::print(stderr, "wrote {}\n", out);
    }
    if (json) {
      fmt::print("{}\n", reports::rl_json(d));
    } else if (!report) {
      fmt::print("{}\npolicy {} on {} x {}\n", d.title, d.policy, d.gpus, d.cluster);
      fmt::print("{}", describe(d.result.best));
      if (d.result.best_per_architecture.size() > 1) {
        fmt::print("\narchitectures (best allocation of each):\n");
        for (const auto& a : d.result.best_per_architecture)
          fmt::print("  {:<14} step {:>8.1f} s  ({:+.1f}%)  rollout/training GPUs {}/{}\n",
                     rl::to_string(a.architecture), a.step_time_s,
                     100 * (a.step_time_s / d.result.best.step_time_s - 1), a.rollout_gpus,
                     a.training_gpus);
      }
      for (const auto& v : d.whatif) {
        if (v.found)
          fmt::print("what if {}: {} step {:.1f} s ({:+.1f}%)\n", v.name,
                     rl::to_string(v.best.architecture), v.best.step_time_s,
                     100 * (v.best.step_time_s / d.result.best.step_time_s - 1));
        else
          fmt::print("what if {}: no plan ({})\n", v.name, v.why);
      }
      if (d.searched) fmt::print("searched in {:.3f} s\n", d.result.elapsed_s);
    }
    ctx.exit_code = 0;
  });
}

}  // namespace dtplan::cli
