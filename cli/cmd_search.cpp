#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/estimate_json.h"
#include "cli/options.h"
#include "cli/search_options.h"
#include "core/atomic_file.h"
#include "core/catalog.h"
#include "core/error.h"
#include "planner/deadline.h"
#include "planner/search.h"
#include "reports/uncertainty.h"
#include "simulator/analytic/estimator.h"
#include "simulator/des/step_sim.h"

namespace dtplan::cli {

namespace {

// The budget of a search that simulates (issue #21: a simulation is priced before it starts).
// search --evaluator des simulates every plan that passes the memory check: this evaluator
// stands in for the simulator in a first pass of the same search, answers with the closed form
// (the plans a search evaluates do not depend on the answers when no evaluator prunes by time,
// and the simulator's evaluator does not), and adds up what simulating each plan would cost.
class SimulationCounter final : public IEvaluator {
 public:
  const char* name() const override { return "des"; }
  Estimate evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                    const Plan& p) const override {
    plans_.fetch_add(1, std::memory_order_relaxed);
    events_.fetch_add(static_cast<uint64_t>(std::llround(des::step_sim_cost(p).events)),
                      std::memory_order_relaxed);
    return closed_form_.evaluate(m, c, w, p);
  }
  std::optional<double> peak_memory(const ModelSpec& m, const Cluster& c, const Workload& w,
                                    const Plan& p) const override {
    return closed_form_.peak_memory(m, c, w, p);
  }
  uint64_t plans() const { return plans_.load(); }
  double events() const { return static_cast<double>(events_.load()); }

 private:
  AnalyticEvaluator closed_form_;
  mutable std::atomic<uint64_t> plans_{0}, events_{0};
};

// Refuses a search whose simulations would run beyond --max-events (InputError naming it).
// The rate: a search simulates 2.4-6.7 M of these estimated events per second per thread
// (measured 2026-12-07 on this project's 2-core build machine, one thread: GPT-3 175B on 256
// A100 at PP8, 2.16e8 in 30 s; Llama 3.1 405B on 16,384 H100 at TP8 PP16, 8.46e7 in 35 s);
// the slower figure is used, so the time said is rather too long than too short.
void check_simulation_budget(double events, uint64_t plans, const char* what, int threads,
                             double max_events) {
  if (events <= max_events) return;
  constexpr double kEventsPerSecondPerThread = 2.4e6;
  const int t = std::max(1, threads);
  throw InputError(
      {}, "--max-events",
      fmt::format("{} would simulate {} plan(s), about {:.3g} events (up to about {:.0f} s on "
                  "{} thread(s)), beyond the budget of {:.3g} events; pass --force to run it "
                  "anyway, rank with the closed form and re-rank only its best plans with "
                  "--refine K, or narrow the space (--tp, --pp, --vpp, --mbs, --gbs)",
                  what, plans, events, events / (kEventsPerSecondPerThread * t), t, max_events));
}

// One CSV field (RFC 4180): quoted when it holds a comma, quote or line break, and a leading
// '=', '+', '-', '@' or tab/CR made text (a leading quote) so that no spreadsheet runs it as a
// formula (OWASP, "CSV Injection").
std::string csv_field(const std::string& s) {
  std::string v = s;
  if (!v.empty() && std::string_view("=+-@\t\r").find(v.front()) != std::string_view::npos)
    v.insert(v.begin(), '\'');
  if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
  std::string q = "\"";
  for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

std::string layout(const Plan& p) {
  std::string sched = p.pp > 1 ? p.schedule.str() : "-";
  if (p.split_stages > 0) sched += fmt::format(" {}:{}", p.split_stages, p.split_layers);
  return fmt::format("{:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>3} {:>4} {:>11} {:>4} {:<11}", p.tp,
                     p.pp, p.cp, p.ep, p.dp, p.vpp, p.sp ? "on" : "-", p.zero, p.recompute_cell(),
                     p.mbs, sched);
}

// The answer's band in days (its plan's p10-p90, as estimate gives it) and, where the slow end
// misses the deadline, the deadline to ask for to meet it there (deadline x days / p90).
struct DeadlineBand {
  bool found = false;
  double low_days = 0, high_days = 0;
  std::optional<double> suggested_deadline_days;
};

DeadlineBand deadline_band(const DeadlineAnswer& a, const SearchFlags& f, const Cluster& c,
                           const ModelSpec& m, const Workload& w, const std::string& stack) {
  DeadlineBand b;
  if (!a.found || a.best.estimate.step_time_s <= 0) return b;
  Cluster at = c;
  at.num_gpus = a.gpus;
  const Uncertainty u = uncertainty_of(m, at, w, a.best.plan, a.best.estimate, stack);
  if (!u.band.found) return b;
  b.found = true;
  b.low_days = a.days * u.step_low_s / a.best.estimate.step_time_s;
  b.high_days = a.days * u.step_high_s / a.best.estimate.step_time_s;
  if (b.high_days > f.deadline_days)
    b.suggested_deadline_days = f.deadline_days * a.days / b.high_days;
  return b;
}

nlohmann::json deadline_to_json(const DeadlineAnswer& a, const SearchFlags& f, const Cluster& c,
                                const ModelSpec& m, const Workload& w, const std::string& stack) {
  nlohmann::json j = {{"days", f.deadline_days},   {"train_tokens", w.train_tokens},
                      {"found", a.found},          {"peak_bound_gpus", a.peak_bound_gpus},
                      {"max_gpus", a.max_gpus},    {"counts_searched", a.counts_searched},
                      {"exhaustive", a.exhaustive}};
  if (a.found) {
    j["gpus"] = a.gpus;
    j["plan"] = a.best.plan.describe();
    j["time_to_train_days"] = a.days;
    j["gpu_hours"] = a.gpu_hours;
    j["mfu"] = a.best.estimate.mfu;
    j["step_time_s"] = a.best.estimate.step_time_s;
    if (a.cost_usd) j["cost_usd"] = *a.cost_usd;
    const DeadlineBand b = deadline_band(a, f, c, m, w, stack);
    if (b.found) {
      j["time_to_train_days_interval"] = {b.low_days, b.high_days};
      j["meets_deadline_at_p90"] = !b.suggested_deadline_days.has_value();
      if (b.suggested_deadline_days) j["deadline_days_for_p90"] = *b.suggested_deadline_days;
    }
  } else if (a.fastest_gpus > 0) {
    j["fastest"] = {{"gpus", a.fastest_gpus}, {"time_to_train_days", a.fastest_days}};
  }
  return j;
}

std::string deadline_to_text(const DeadlineAnswer& a, const SearchFlags& f, const Cluster& c,
                             const ModelSpec& m, const Workload& w, const std::string& stack) {
  const int node = c.profile.node.gpus_per_node;
  std::string s =
      fmt::format("deadline: {:.3g}T tokens in {:g} days ", f.train_tokens / 1e12, f.deadline_days);
  if (!a.found) {
    s += fmt::format("cannot be met with up to {} GPUs", a.max_gpus);
    if (a.fastest_gpus > 0)
      s += fmt::format(" (the fastest seen: {:.1f} days on {} GPUs)", a.fastest_days,
                       a.fastest_gpus);
    return s + fmt::format("; at 100% MFU it would need {} GPUs\n", a.peak_bound_gpus);
  }
  s += fmt::format(
      "needs {} GPUs ({} nodes of {}): {:.1f} days at {:.1f}% MFU, {:.3g} GPU-hours{}, with {}\n",
      a.gpus, a.gpus / node, node, a.days, 100 * a.best.estimate.mfu, a.gpu_hours,
      a.cost_usd
          ? fmt::format(", ${:.3g} at ${:.2f}/GPU-hour", *a.cost_usd, *c.profile.usd_per_gpu_hour)
          : "",
      a.best.plan.describe());
  // How sure: the plan's band (as estimate gives it) in days. The fewest GPUs meet the deadline
  // at the prediction itself; where the band's slow end misses it, say so and what deadline to
  // ask for to meet it there (a new-user trial: 26.9 days against 30, p90 30.8, with no word).
  const DeadlineBand b = deadline_band(a, f, c, m, w, stack);
  if (b.found)
    s += fmt::format("  p10-p90 {:.1f}–{:.1f} days{}\n", b.low_days, b.high_days,
                     b.suggested_deadline_days
                         ? fmt::format(": at its p90 it misses the deadline; to meet it there, "
                                       "search with --deadline-days {:.3g}",
                                       *b.suggested_deadline_days)
                         : "");
  s += fmt::format("  (searched {} GPU counts above the 100%-MFU bound of {} GPUs; {})\n",
                   a.counts_searched, a.peak_bound_gpus,
                   a.exhaustive
                       ? "every node count from the last that failed to the answer was searched"
                       : "the bracket was halved first, assuming more GPUs are never slower");
  return s;
}

}  // namespace

void register_search(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("search", "Search every feasible parallel layout and rank them");
  static SearchFlags flags;
  static int refine = 0;
  static std::string evaluator_name = "analytic";
  static bool json = false, force = false;
  static double max_events = 1e9;  // up to about 7 min on one thread (check_simulation_budget)
  static std::string csv, out;
  add_search_flags(*cmd, flags);
  cmd->add_option("--refine", refine,
                  "Re-rank the best K plans with the discrete-event simulator (then show "
                  "--top of them)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--evaluator", evaluator_name,
                  "analytic: the closed form; des: simulate every feasible plan as discrete "
                  "events (no pruning by time: for small spaces, or use --refine)")
      ->check(CLI::IsMember({"analytic", "des"}))
      ->capture_default_str();
  cmd->add_option("--max-events", max_events,
                  "Budget of --evaluator des and --refine: refuse a search whose simulations "
                  "are estimated to take more events than this in all (2.4-6.7 M events/s per "
                  "thread), before the first one, unless --force")
      ->check(finite_range(1, 1e15))
      ->capture_default_str();
  cmd->add_flag("--force", force, "Run the simulations beyond --max-events");
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->add_option("--csv", csv,
                  "Also write the ranked plans as CSV (NeMo auto-configurator columns)");
  cmd->add_option("--out,-o", out, "Write the output to this file (atomically)");
  cmd->footer(
      "With no model or cluster flag, searches the built-in example: GPT-3 175B on 32 DGX A100 "
      "80GB nodes (256 GPUs), batch 1536 x 2048 tokens.");
  cmd->callback([&ctx, cmd] {
    if (no_spec_given(*cmd)) {
      apply_builtin_example(flags);
      fmt::print(stderr,
                 "dtplan search: no model or cluster given; using the built-in example "
                 "(see --help)\n");
    }
    SearchSetup setup = make_search_setup(flags);
    const ModelSpec& model = setup.model;
    const Cluster& cluster = setup.cluster;
    const Workload& w = setup.workload;
    SearchOptions& opt = setup.options;
    const std::string& precision = flags.precision;
    const std::string& objective = flags.objective;
    const std::string& framework = flags.framework;
    if (cluster.heterogeneous() && (flags.deadline_days > 0 || flags.budget_gpu_hours > 0))
      throw InputError({}, flags.deadline_days > 0 ? "--deadline-days" : "--budget-gpu-hours",
                       "searches over node counts take homogeneous clusters only (a "
                       "heterogeneous cluster's node count is its groups')");
    if (opt.objective == Objective::kCost && !cluster.profile.usd_per_gpu_hour)
      fmt::print(stderr, "dtplan search: profile {} has no price; cost is in GPU-hours per step\n",
                 cluster.profile.name);

    // Progress bar with ETA on a terminal, for searches that run past a second; silent when
    // stderr is piped or redirected.
    const auto started = std::chrono::steady_clock::now();
    bool drew = false;
    double drawn_at = 0;
    if (isatty(STDERR_FILENO)) {
      opt.progress = [&](double done) {
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (elapsed < 1.0 || done <= 0) return;
        if (drew && elapsed - drawn_at < 0.1 && done < 1) return;  // ten redraws a second
        drawn_at = elapsed;
        const int width = 30, filled = static_cast<int>(done * width);
        fmt::print(stderr, "\r  searching [{}{}] {:3.0f}%  ETA {:.0f} s ", std::string(filled, '#'),
                   std::string(width - filled, ' '), 100 * done, elapsed * (1 - done) / done);
        drew = true;
      };
    }
    const AnalyticEvaluator analytic;
    const DesEvaluator des;
    const int max_gpus = flags.max_gpus > 0      ? flags.max_gpus
                         : !cluster.file.empty() ? cluster.num_gpus
                                                 : 1 << 20;
    const int threads = opt.threads > 0
                            ? opt.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const bool distinct = distinct_ranking(flags);
    if (distinct) widen_for_distinct(setup, flags);
    // --refine K re-ranks K plans, however few are shown.
    if (refine > 0) setup.options.top_k = std::max(setup.options.top_k, refine);
    // The whole search (node counts first under --deadline-days / --budget-gpu-hours, then the
    // plans at the chosen count) with one evaluator.
    struct Outcome {
      std::optional<DeadlineAnswer> deadline;
      std::optional<BudgetAnswer> budget;
      bool answer_only = false;
      SearchResult r;
    };
    auto run = [&](const IEvaluator& evaluator, SearchSetup& s) {
      Outcome o;
      // --deadline-days: the fewest GPUs whose best plan trains the tokens in time; without
      // --gpus the ranking below is on that count.
      if (flags.budget_gpu_hours > 0) {
        o.budget = fastest_within_budget(model, cluster, w, s.space, s.options, evaluator,
                                         flags.budget_gpu_hours, max_gpus);
        if (flags.spec.gpus == 0 && o.budget->found) s.cluster.num_gpus = o.budget->gpus;
      }
      if (flags.deadline_days > 0) {
        o.deadline = fewest_gpus_for_deadline(model, cluster, w, s.space, s.options, evaluator,
                                              flags.deadline_days, max_gpus);
        if (flags.spec.gpus == 0 && o.deadline->found) s.cluster.num_gpus = o.deadline->gpus;
      }
      // A deadline or budget that cannot be met without --gpus: the answer says so, and there
      // is no GPU count to rank plans on.
      o.answer_only = flags.spec.gpus == 0 &&
                      ((o.deadline && !o.deadline->found) || (o.budget && !o.budget->found));
      if (!o.answer_only) o.r = search(model, s.cluster, w, s.space, s.options, evaluator);
      return o;
    };
    if (evaluator_name == "des" && !force) {
      // The same search priced first (no progress bar: it is the quick part).
      SearchSetup counted = setup;
      counted.options.progress = nullptr;
      const SimulationCounter counter;
      run(counter, counted);
      check_simulation_budget(counter.events(), counter.plans(), "search --evaluator des", threads,
                              max_events);
    }
    const IEvaluator& evaluator =
        evaluator_name == "des" ? static_cast<const IEvaluator&>(des) : analytic;
    Outcome outcome = run(evaluator, setup);
    const std::optional<DeadlineAnswer>& deadline = outcome.deadline;
    const std::optional<BudgetAnswer>& budget = outcome.budget;
    const bool answer_only = outcome.answer_only;
    SearchResult& r = outcome.r;
    if (drew) fmt::print(stderr, "\r{}\r", std::string(60, ' '));
    if (refine > 0 && !force) {
      double events = 0;
      const size_t k = std::min(static_cast<size_t>(refine), r.top.size());
      for (size_t i = 0; i < k; ++i) events += des::step_sim_cost(r.top[i].plan).events;
      check_simulation_budget(events, k, "--refine", threads, max_events);
    }
    if (refine > 0) refine_top(r, model, cluster, w, opt, DesEvaluator{}, refine);
    const size_t refined_count = std::min(static_cast<size_t>(refine), r.top.size());
    if (distinct) distinct_layouts_first(r, static_cast<size_t>(flags.top));
    if (r.top.size() > static_cast<size_t>(flags.top)) r.top.resize(static_cast<size_t>(flags.top));

    std::string text;
    auto o = std::back_inserter(text);
    const double gib = units::kGiB;
    if (json) {
      nlohmann::json j = search_to_json(flags, setup, r, evaluator.name(), refine);
      if (deadline)
        j["deadline"] =
            deadline_to_json(*deadline, flags, cluster, model, w, setup.framework_stack);
      if (budget) {
        nlohmann::json b = {{"budget_gpu_hours", flags.budget_gpu_hours},
                            {"train_tokens", w.train_tokens},
                            {"found", budget->found},
                            {"peak_bound_gpu_hours", budget->peak_bound_gpu_hours},
                            {"counts_searched", budget->counts_searched},
                            {"exhaustive", budget->exhaustive}};
        if (budget->found) {
          b["gpus"] = budget->gpus;
          b["plan"] = budget->best.plan.describe();
          b["time_to_train_days"] = budget->days;
          b["gpu_hours"] = budget->gpu_hours;
          b["mfu"] = budget->best.estimate.mfu;
          if (budget->cost_usd) b["cost_usd"] = *budget->cost_usd;
        }
        j["budget"] = b;
      }
      text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    } else if (answer_only) {
      if (deadline)
        text += deadline_to_text(*deadline, flags, cluster, model, w, setup.framework_stack);
      if (budget)
        text += fmt::format(
            "budget: {:.3g} GPU-hours cannot train {:.3g}T tokens on up to {} GPUs (at 100% MFU "
            "it would take {:.3g})\n",
            flags.budget_gpu_hours, w.train_tokens / 1e12, budget->max_gpus,
            budget->peak_bound_gpu_hours);
    } else {
      const std::vector<int64_t>& batches = setup.space.gbs;
      const std::string batch = batches.size() > 1
                                    ? fmt::format("batch {}-{} ({} values)", batches.front(),
                                                  batches.back(), batches.size())
                                    : fmt::format("batch {}", w.global_batch);
      std::string hardware = fmt::format("{} x {} ({})", cluster.num_gpus, cluster.profile.gpu.name,
                                         cluster.profile.name);
      if (cluster.heterogeneous()) {
        hardware =
            fmt::format("{} GPUs in {} device groups (", cluster.num_gpus, cluster.groups_used());
        for (int g = 0; g < cluster.groups_used(); ++g)
          hardware += fmt::format("{}{} x {}", g > 0 ? ", then " : "",
                                  cluster.group_first_rank(g + 1) - cluster.group_first_rank(g),
                                  cluster.groups[static_cast<size_t>(g)].profile.gpu.name);
        hardware += ")";
      }
      fmt::format_to(o, "{} on {}, {} x {} tokens, {}; objective {}{}, framework {}\n",
                     model.display_name, hardware, batch, w.seq_len, precision, objective,
                     r.per_token && (opt.objective == Objective::kStepTime ||
                                     opt.objective == Objective::kCost)
                         ? " per token (several global batches: tok/s/GPU ranks the same)"
                         : "",
                     framework);
      fmt::format_to(
          o,
          "enumerated {} plans in {:.2f} s ({:.0f} plans/s on {} threads), evaluated {}{}, "
          "feasible {}, space {}\n\n",
          r.enumerated, r.elapsed_s, r.plans_per_s(), r.threads, r.evaluated,
          evaluator_name == "des" ? " (each simulated as discrete events)" : "", r.feasible,
          r.exhausted ? "exhausted" : "NOT exhausted");
      if (deadline)
        fmt::format_to(
            o, "{}\n",
            deadline_to_text(*deadline, flags, cluster, model, w, setup.framework_stack));
      if (budget) {
        if (budget->found)
          fmt::format_to(
              o,
              "budget: {:.3g} GPU-hours train {:.3g}T tokens fastest on {} GPUs: {:.1f} days at "
              "{:.1f}% MFU, {:.3g} GPU-hours{}, with {}\n  (searched {} GPU counts; {})\n\n",
              flags.budget_gpu_hours, w.train_tokens / 1e12, budget->gpus, budget->days,
              100 * budget->best.estimate.mfu, budget->gpu_hours,
              budget->cost_usd ? fmt::format(", ${:.3g}", *budget->cost_usd) : "",
              budget->best.plan.describe(), budget->counts_searched,
              budget->exhaustive
                  ? fmt::format("every node count up to {} GPUs", budget->max_gpus)
                  : fmt::format("node x 2^k and node x 3 x 2^k up to {} GPUs, then the node "
                                "counts above the fastest of them; GPU-hours are not monotonic "
                                "in GPUs, so a count off that ladder may do better (--max-gpus "
                                "bounds the ladder)",
                                budget->max_gpus));
        else
          fmt::format_to(o,
                         "budget: {:.3g} GPU-hours cannot train {:.3g}T tokens on up to {} GPUs "
                         "(at 100% MFU it would take {:.3g})\n\n",
                         flags.budget_gpu_hours, w.train_tokens / 1e12, budget->max_gpus,
                         budget->peak_bound_gpu_hours);
      }
      if (r.top.empty()) {
        fmt::format_to(o, "{}",
                       r.enumerated == 0
                           ? "no plan to search: no layout of these GPUs takes the pinned values "
                             "(--tp, --pp, --cp, --ep, --etp, --vpp, --mbs must divide what they "
                             "split)\n"
                           : "no feasible plan: see the rejections below\n");
      } else {
        // The global batch is a column when several were searched.
        const bool gbs_col = batches.size() > 1;
        fmt::format_to(o,
                       "{:>4}  {:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>3} {:>4} {:>11} {:>4} {:<11} "
                       "{}{:>9} {:>15} {:>6} {:>9} {:>8} {:>6} {:>7}{}\n",
                       "rank", "TP", "PP", "CP", "EP", "DP", "VPP", "SP", "ZeRO", "recompute",
                       "MBS", "schedule", gbs_col ? fmt::format("{:>6} ", "GBS") : "", "step (s)",
                       "p10-p90 (s)", "MFU", "tok/s/GPU", "peak GiB", "comm%", "bubble%",
                       w.train_tokens > 0 ? fmt::format(" {:>8}", "days") : "");
        for (size_t i = 0; i < r.top.size(); ++i) {
          const Candidate& c = r.top[i];
          const Uncertainty ui =
              uncertainty_of(model, cluster, w, c.plan, c.estimate, setup.framework_stack);
          fmt::format_to(
              o, "{:>4}  {} {}{:>9.3f} {:>15} {:>5.1f}% {:>9.0f} {:>8.1f} {:>5.1f}% {:>6.1f}%{}\n",
              i + 1, layout(c.plan), gbs_col ? fmt::format("{:>6} ", c.plan.gbs) : "",
              c.estimate.step_time_s,
              ui.band.found ? fmt::format("{:.4g}–{:.4g}", ui.step_low_s, ui.step_high_s) : "-",
              100 * c.estimate.mfu, c.estimate.tokens_per_s_per_gpu,
              c.estimate.memory_peak.total_bytes() / gib, 100 * c.estimate.comm_share,
              100 * c.estimate.bubble_fraction,
              w.train_tokens > 0 ? fmt::format(" {:>8.1f}", c.estimate.time_to_train_days) : "");
        }
        {
          const Candidate& best = r.top.front();
          const Uncertainty u =
              uncertainty_of(model, cluster, w, best.plan, best.estimate, setup.framework_stack);
          if (u.band.found)
            fmt::format_to(
                o,
                "rank 1: step {:.3f} s, p10-p90 {:.3f}–{:.3f} s (MFU {:.1f}–{:.1f}%{}), "
                "from {} published runs like it ({}{})\n",
                best.estimate.step_time_s, u.step_low_s, u.step_high_s, 100 * u.mfu_low,
                100 * u.mfu_high,
                w.train_tokens > 0 ? fmt::format("; {:.1f}–{:.1f} days", u.days_low, u.days_high)
                                   : "",
                u.band.cases, u.band.regime,
                u.band.dropped.empty()
                    ? ""
                    : fmt::format("; too few runs to match {}", fmt::join(u.band.dropped, ", ")));
          for (const FrameworkWarning& wn : search_framework_warnings(setup, best.plan))
            fmt::format_to(o, "warning [{}]: {}\n", wn.code, wn.message);
          for (const NumberWarning& wn : u.warnings)
            fmt::format_to(o, "warning [{}]: {}\n", wn.code, wn.message);
          // Which peak the MFU column is of (as estimate says it): the training precision's, so
          // an FP8 plan's MFU reads half what it would against the BF16 peak on Hopper.
          const Estimate& e = best.estimate;
          if (e.mfu > 0) {
            const double bf16_tflops = cluster.profile.gpu.peak_flops(Precision::kBf16) / 1e12;
            const double peak_tflops = e.model_tflops_per_gpu / e.mfu;
            fmt::format_to(
                o, "(MFU: of the {:.0f} TFLOP/s {} dense peak per GPU{})\n", peak_tflops,
                to_string(w.precision),
                w.precision == Precision::kFp8 && bf16_tflops > 0
                    ? fmt::format("; against the BF16 peak ({:.0f} TFLOP/s) rank 1 "
                                  "reads {:.1f}%",
                                  bf16_tflops, 100 * e.model_tflops_per_gpu / bf16_tflops)
                    : "");
          }
        }
        if (std::any_of(r.top.begin(), r.top.end(),
                        [](const Candidate& k) { return k.plan.split_stages > 0; }))
          fmt::format_to(o,
                         "(schedule K:A: the first K stages hold A layers each, the others an "
                         "equal share of the rest: --stage-split K:A, docs/heterogeneous.md)\n");
        if (distinct)
          fmt::format_to(o,
                         "(the best plan of each distinct TP/PP/CP/EP/ZeRO/recompute layout first, "
                         "then the others; --no-distinct for the plain ranking)\n");
        if (refine > 0) {
          const auto shown = std::count_if(r.top.begin(), r.top.end(),
                                           [](const Candidate& k) { return k.refined; });
          fmt::format_to(o,
                         "(the best {} by the closed form re-ranked by the discrete-event "
                         "simulator; {} of the {} above are among them and show simulated "
                         "figures; the Pareto front below keeps the closed form's)\n",
                         refined_count, shown, r.top.size());
        }
        if (r.per_token) {
          fmt::format_to(o, "\nPareto front (time per token, as tok/s/GPU, vs peak memory):\n");
          for (const auto& c : r.pareto)
            fmt::format_to(o, "  {:>9.0f} tok/s/GPU {:>9.3f} s {:>7.1f} GiB  {}\n",
                           c.estimate.tokens_per_s_per_gpu, c.estimate.step_time_s,
                           c.estimate.memory_peak.total_bytes() / gib, c.plan.describe());
        } else {
          fmt::format_to(o, "\nPareto front (step time vs peak memory):\n");
          for (const auto& c : r.pareto)
            fmt::format_to(o, "  {:>9.3f} s {:>7.1f} GiB  {}\n", c.estimate.step_time_s,
                           c.estimate.memory_peak.total_bytes() / gib, c.plan.describe());
        }
      }
      fmt::format_to(o, "\nrejected plans by reason:\n");
      for (int k = 0; k < kNumRejections; ++k)
        if (r.rejected[static_cast<size_t>(k)] > 0)
          fmt::format_to(o, "  {:>9}  {}\n             e.g. {}\n",
                         r.rejected[static_cast<size_t>(k)], describe(static_cast<Rejection>(k)),
                         r.example[static_cast<size_t>(k)]);
    }
    if (!csv.empty()) {
      std::string c =
          "Model Name,Model Size,Seq Length,TP,PP,CP,EP,DP,MBS,VP,Num Layers,Hidden Size,"
          "FFN Hidden Size,GBS,Nodes,GPUs per Node,ZeRO,Recompute,Schedule,Time per Step,"
          "Samples per Second,Model TFLOPS / GPU,Model TFLOPS Aggregate,MFU,Peak Memory GiB\n";
      const double params_b = static_cast<double>(count_params(model).total()) / 1e9;
      for (const auto& cand : r.top) {
        const Plan& p = cand.plan;
        const Estimate& e = cand.estimate;
        c += fmt::format(
            "{},{:.1f}B,{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.4f},{:.3f},{:.1f},{:."
            "1f},{:.4f},{:.2f}\n",
            csv_field(model.name), params_b, w.seq_len, p.tp, p.pp, p.cp, p.ep, p.dp, p.mbs, p.vpp,
            model.layers, model.hidden, model.ffn_hidden, p.gbs, cluster.nodes(),
            cluster.profile.node.gpus_per_node, p.zero, p.recompute_cell(),
            p.pp > 1
                ? p.schedule.str() + (p.split_stages > 0
                                          ? fmt::format(" {}:{}", p.split_stages, p.split_layers)
                                          : std::string())
                : "none",
            e.step_time_s, static_cast<double>(p.gbs) / e.step_time_s, e.model_tflops_per_gpu,
            e.model_tflops_per_gpu * cluster.num_gpus, e.mfu, e.memory_peak.total_bytes() / gib);
      }
      write_file_atomic(csv, c);
      fmt::print(stderr, "wrote {}\n", csv);
    }
    write_output(text, out);
    ctx.exit_code = r.top.empty() && !answer_only ? 2 : 0;
    // The reason on stderr too, where a script reading the exit code looks for it.
    if (ctx.exit_code == 2)
      fmt::print(stderr, "dtplan: error: {}\n",
                 r.enumerated == 0
                     ? "no layout of these GPUs takes the pinned values (--tp, --pp, --cp, --ep, "
                       "--etp, --vpp, --mbs must divide what they split)"
                     : "no feasible plan (the output lists the rejections)");
  });
}

}  // namespace dtplan::cli
