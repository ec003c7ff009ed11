#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "cli/commands.h"
#include "cli/estimate_json.h"
#include "cli/framework_check.h"
#include "cli/options.h"
#include "cli/search_options.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/gzip.h"
#include "simulator/cost/calibration_coverage.h"
#include "simulator/des/perfetto_proto.h"
#include "simulator/des/step_sim.h"

namespace dtplan::cli {

namespace {

// Half of this machine's memory, in GiB: the default --max-memory-gib.
double default_memory_budget_gib() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 8;
  return 0.5 * static_cast<double>(pages) * static_cast<double>(page) / (1024.0 * 1024 * 1024);
}

// "simulating: 42% of 2.9 M events, about 12 s left" on stderr, rewritten in place at most
// five times a second, when stderr is a terminal.
class ProgressLine {
 public:
  ProgressLine() : enabled_(isatty(STDERR_FILENO) != 0), start_(clock::now()), last_(start_) {}
  bool enabled() const { return enabled_; }
  void update(uint64_t done, double total) {
    const auto now = clock::now();
    if (now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    const double el = std::chrono::duration<double>(now - start_).count();
    const double frac = total > 0 ? std::min(1.0, static_cast<double>(done) / total) : 0;
    const double left = frac > 0 ? el * (1 - frac) / frac : 0;
    fmt::print(stderr, "\r\033[Ksimulating: {:.0f}% of about {:.3g} events, about {:.0f} s left",
               100 * frac, total, left);
    shown_ = true;
  }
  void clear() {
    if (shown_) fmt::print(stderr, "\r\033[K");
    shown_ = false;
    start_ = last_ = clock::now();
  }

 private:
  using clock = std::chrono::steady_clock;
  bool enabled_, shown_ = false;
  clock::time_point start_, last_;
};

// --trace-ranks: 'all' or GPU ids and ranges ("0-7,64"), as simulated ranks (indices of
// StepSimResult::gpus); a GPU that is not simulated is refused with the reason.
std::vector<int> parse_trace_ranks(const std::string& list, const des::StepSimResult& s,
                                   bool all_ranks) {
  std::vector<int> out;
  if (list == "all") {
    for (int k = 0; k < s.ranks; ++k) out.push_back(k);
    return out;
  }
  std::unordered_map<int, int> rank_of;  // GPU -> simulated rank
  for (size_t k = 0; k < s.gpus.size(); ++k) rank_of.emplace(s.gpus[k], static_cast<int>(k));
  std::vector<char> taken(s.gpus.size(), 0);
  for (const int g : parse_int_set(list, "--trace-ranks", 2097151, /*positive=*/false)) {
    const auto it = rank_of.find(g);
    if (it == rank_of.end())
      throw InputError({}, "--trace-ranks",
                       all_ranks ? fmt::format("GPU {} is not one of the {} GPUs", g, s.ranks)
                                 : fmt::format("GPU {} is not simulated: with --ranks stage each "
                                               "stage's first GPU is (GPU {} ...); --ranks all "
                                               "simulates every GPU",
                                               g, s.gpus.empty() ? 0 : s.gpus.front()));
    if (!taken[static_cast<size_t>(it->second)]) out.push_back(it->second);
    taken[static_cast<size_t>(it->second)] = 1;
  }
  return out;
}

}  // namespace

void register_simulate(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "simulate",
      "Simulate one step as discrete events (pipeline schedule, sends over shared links)");
  static SpecOptions spec;
  static PlanOptions plan;
  static bool json = false;
  static std::string trace, trace_ranks, contention = "on", ranks = "stage", framework;
  static std::vector<std::string> slow_gpu, slow_link;
  static double jitter = 0;
  static int64_t seed = 1;
  static int max_ranks = des::kMaxAllRanks;
  static double max_events = 5e8, max_memory_gib = default_memory_budget_gib();
  static bool force = false;
  add_spec_options(*cmd, spec);
  add_plan_options(*cmd, plan);
  add_resilience_options(*cmd, spec);
  add_framework_option(*cmd, framework);
  cmd->add_flag("--json", json, "Machine-readable output (the estimate's fields)");
  cmd->add_option("--trace", trace,
                  "Write a trace to open in ui.perfetto.dev: FILE.pftrace (Perfetto's protobuf), "
                  "FILE.json.gz (gzip'd JSON) or FILE.json (Chrome trace-event JSON)")
      ->check([](const std::string& v) { return v.empty() ? "needs a file name" : ""; });
  cmd->add_option("--trace-ranks", trace_ranks,
                  "GPUs the trace shows: 'all', or a list such as 0-7,64 (default: the first "
                  "replica's GPU of each stage and the slowest GPU); GPUs with the same timeline "
                  "share one process");
  cmd->add_option("--contention", contention,
                  "on: concurrent transfers (pipeline sends, data-parallel reductions) share "
                  "link bandwidth (max-min fair) and communication slows concurrent compute "
                  "(the profile's comm_compute_slowdown); off: every transfer runs as if alone")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--ranks", ranks,
                  "stage: one representative rank per pipeline stage (its data- and "
                  "tensor-parallel peers are identical); all: every GPU, each on its own links "
                  "(up to --max-ranks GPUs; replicas that share no link and are alike are "
                  "simulated once)")
      ->check(CLI::IsMember({"stage", "all"}))
      ->capture_default_str();
  cmd->add_option("--max-ranks", max_ranks,
                  "The most GPUs --ranks all simulates (a guard against runs that would not "
                  "finish: without symmetry, e.g. with --jitter, every replica is simulated)")
      ->check(CLI::Range(1, 2097151))
      ->capture_default_str();
  cmd->add_option("--max-events", max_events,
                  "Budget: refuse a simulation estimated to take more events than this (about "
                  "1.5 M events/s on one core) unless --force")
      ->check(finite_range(1, 1e15))
      ->capture_default_str();
  cmd->add_option("--max-memory-gib", max_memory_gib,
                  "Budget: refuse a simulation estimated to hold more memory than this (default: "
                  "half of this machine's memory) unless --force")
      ->check(finite_range(0.001, 1e9))
      ->capture_default_str();
  cmd->add_flag("--force", force, "Run a simulation beyond --max-events or --max-memory-gib");
  const char* fg = "Faults (docs/simulator.md)";
  cmd->add_option("--slow-gpu", slow_gpu,
                  "RANK:FACTOR: that GPU's kernels take FACTOR times longer (repeatable); its "
                  "TP/CP group and the synchronous step follow it")
      ->group(fg);
  cmd->add_option("--slow-link", slow_link,
                  "NODE:FACTOR: that node's NICs run FACTOR times slower (repeatable)")
      ->group(fg);
  cmd->add_option("--jitter", jitter,
                  "SIGMA: every task is slowed by a mean-one lognormal exp(SIGMA Z - SIGMA^2/2), "
                  "the slowest of its TP/CP group's draws")
      ->check(finite_range(0.0, 2.0))
      ->group(fg);
  cmd->add_option("--seed", seed, "Seed of the jitter draws")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62))
      ->group(fg);
  cmd->footer(
      "With no model, cluster or plan flag, simulates the built-in example: GPT-3 175B on 32 "
      "DGX A100 80GB nodes, TP8 PP8 SP, selective recompute, distributed optimizer, gbs 1536.");
  cmd->callback([&ctx, cmd] {
    if (!any_option_given(*cmd, {"--json", "--trace", "--contention", "--ranks", "--framework",
                                 "--loader-tokens-per-s-per-node", "--async-save", "--restart-s",
                                 "--checkpoint-interval-s", "--skipped-steps",
                                 "--straggler-fraction", "--straggler-factor", "--slow-gpu",
                                 "--slow-link", "--jitter", "--seed", "--max-ranks"})) {
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
    if (!trace_ranks.empty() && trace.empty())
      throw InputError({}, "--trace-ranks",
                       "selects the GPUs a trace shows: give --trace FILE too");
    // The format is the file's extension: refuse one that names none (a trace.txt was written
    // as JSON under a name no viewer or script would take for it).
    // (A folder is refused by the writer, which says so.)
    if (!trace.empty() && !std::filesystem::is_directory(trace) && !trace.ends_with(".json") &&
        !trace.ends_with(".json.gz") && !trace.ends_with(".pftrace") &&
        !trace.ends_with(".perfetto-trace"))
      throw InputError({}, "--trace",
                       fmt::format("'{}': the extension sets the format: .pftrace or "
                                   ".perfetto-trace (Perfetto protobuf), .json.gz (gzip'd JSON) "
                                   "or .json (Chrome trace-event JSON)",
                                   trace));
    const FrameworkCheck fw = select_framework(framework, *cmd, r);
    throw_if_refused(fw);
    des::SimFaults faults;
    auto parse_pairs = [](const std::vector<std::string>& items, const char* flag,
                          const char* what) {
      std::vector<std::pair<int, double>> out;
      for (const auto& item : items) {
        const auto colon = item.find(':');
        int index = -1;
        double factor = 0;
        bool ok = colon != std::string::npos;
        try {
          size_t a = 0, b = 0;
          if (ok) index = std::stoi(item.substr(0, colon), &a);
          if (ok) factor = std::stod(item.substr(colon + 1), &b);
          ok = ok && a == colon && b == item.size() - colon - 1;
        } catch (const std::exception&) {
          ok = false;
        }
        if (!ok || index < 0)
          throw InputError({}, flag, fmt::format("'{}' is not {}:FACTOR (e.g. 5:1.2)", item, what));
        if (!std::isfinite(factor) || factor < 1 || factor > 1000)
          throw InputError({}, flag,
                           fmt::format("factor {} in '{}' is not in [1, 1000] (a slowdown)",
                                       item.substr(colon + 1), item));
        for (const auto& [i, f] : out)
          if (i == index)
            throw InputError({}, flag, fmt::format("{} {} is given twice", what, index));
        out.emplace_back(index, factor);
      }
      return out;
    };
    faults.slow_gpus = parse_pairs(slow_gpu, "--slow-gpu", "RANK");
    faults.slow_links = parse_pairs(slow_link, "--slow-link", "NODE");
    faults.jitter_sigma = jitter;
    faults.seed = static_cast<uint64_t>(seed);
    // The budget, checked once the simulator knows the ranks it will run, and progress with an
    // estimated time left on a terminal (issue #21).
    des::SimHooks hooks;
    des::SimCost estimated;
    hooks.before_run = [&](const des::SimCost& c) {
      estimated = c;
      const double gib = c.memory_bytes / (1024.0 * 1024 * 1024);
      const char* flag = c.events > max_events ? "--max-events" : "--max-memory-gib";
      if (!force && (c.events > max_events || gib > max_memory_gib))
        throw InputError(
            {}, flag,
            fmt::format("this simulation would run about {:.3g} events ({:.3g} tasks on {:.0f} "
                        "simulated rank(s)) and hold about {:.1f} GiB{}, beyond the budget of "
                        "{:.3g} events and {:.1f} GiB; pass --force to run it anyway, or "
                        "simulate fewer ranks (--ranks stage), fewer micro-batches (--gbs) or "
                        "no trace",
                        c.events, c.tasks, c.ranks, gib, trace.empty() ? "" : " with the trace",
                        max_events, max_memory_gib));
    };
    ProgressLine progress;
    if (progress.enabled())
      hooks.progress = [&](uint64_t done, const des::SimCost& c) {
        progress.update(done, c.events);
      };
    des::SimOptions so;
    so.hooks = &hooks;
    so.link_sharing = contention == "on";
    so.record_trace = !trace.empty();
    so.all_ranks = ranks == "all";
    so.max_ranks = max_ranks;
    CalibrationCoverage coverage;
    des::StepSimResult s = [&] {
      CoverageScope scope(coverage);
      return des::simulate_step(r.model, r.cluster, r.workload, r.plan, so, faults);
    }();
    progress.clear();
    // The warnings estimate gives for the same plan (does not fit, how sure, calibration range).
    const std::vector<std::string> flags = coverage.warnings();
    const std::vector<NumberWarning> warnings = step_warnings(r, s.estimate, flags);
    // The same step without the faults, to say what they cost.
    double clean_step_s = s.estimate.step_time_s;
    if (!faults.empty()) {
      // Costs no more than the run above (the same plan without faults, no trace): the budget
      // and the estimate reported are that run's.
      hooks.before_run = nullptr;
      so.record_trace = false;
      clean_step_s =
          des::simulate_step(r.model, r.cluster, r.workload, r.plan, so).estimate.step_time_s;
      progress.clear();
    }
    if (!trace.empty()) {
      const std::vector<int> shown = trace_ranks.empty()
                                         ? des::default_trace_ranks(s, r.plan.pp)
                                         : parse_trace_ranks(trace_ranks, s, ranks == "all");
      const std::vector<des::TraceProcess> processes = des::trace_processes(s, r.plan.pp, shown);
      const bool proto = trace.ends_with(".pftrace") || trace.ends_with(".perfetto-trace");
      const bool gz = !proto && trace.ends_with(".gz");
      // Streamed to the file as it is laid out (issue #21: a large trace's text no longer sits
      // in memory whole); the file appears complete or not at all.
      AtomicFileWriter out(trace);
      uint64_t text_bytes = 0;
      std::unique_ptr<GzipStream> zip;
      if (gz) zip = std::make_unique<GzipStream>([&](std::string_view z) { out.write(z); });
      const des::TraceSink sink = [&](std::string_view piece) {
        text_bytes += piece.size();
        if (zip)
          zip->write(piece);
        else
          out.write(piece);
      };
      if (proto)
        des::write_trace_proto(s.trace, processes, sink);
      else
        des::write_trace_json(s.trace, processes, sink);
      if (zip) zip->finish();
      const uint64_t file_bytes = out.bytes_written();
      out.commit();
      const auto json_bytes = static_cast<size_t>(text_bytes);
      auto size = [](double bytes) {
        return bytes < 1e6 ? fmt::format("{:.0f} kB", bytes / 1e3)
                           : fmt::format("{:.1f} MB", bytes / 1e6);
      };
      fmt::print(stderr, "wrote {} ({}{}; {} GPU(s) in {} process(es)){}\n", trace,
                 size(static_cast<double>(file_bytes)),
                 gz ? fmt::format(", {} of JSON", size(static_cast<double>(json_bytes))) : "",
                 shown.size(), processes.size(),
                 json_bytes > 100'000'000
                     ? "; large traces load slowly in ui.perfetto.dev (--trace-ranks selects "
                       "GPUs, FILE.json.gz compresses)"
                     : "");
    }
    if (json) {
      auto j = estimate_to_json(r, s.estimate, FlopsConvention::kCausalHalf);
      j["evaluator"] = "des";
      j["analytic_step_time_s"] = s.analytic_step_s;
      j["simulated_events"] = s.events;
      // What the budget was checked against (--max-events, --max-memory-gib).
      j["estimated_events"] = estimated.events;
      j["estimated_memory_gib"] = estimated.memory_bytes / (1024.0 * 1024 * 1024);
      j["simulated_ranks"] = s.ranks;
      j["distinct_simulated_ranks"] = s.simulated_ranks;  // after the symmetry reduction
      j["independent_replica_groups"] = s.replica_groups;
      j["rank_set"] = ranks;  // --ranks: stage or all
      j["contention"] = contention == "on";
      if (!faults.empty()) {
        nlohmann::json fj = {{"step_time_s_without_faults", clean_step_s},
                             {"slowdown", s.estimate.step_time_s / clean_step_s},
                             {"jitter_sigma", faults.jitter_sigma},
                             {"seed", faults.seed}};
        fj["slow_gpus"] = nlohmann::json::array();
        for (const auto& [g, f] : faults.slow_gpus)
          fj["slow_gpus"].push_back(
              {{"rank", g}, {"factor", f}, {"stage", des::stage_of_rank(r.plan, g)}});
        fj["slow_links"] = nlohmann::json::array();
        for (const auto& [n, f] : faults.slow_links)
          fj["slow_links"].push_back({{"node", n}, {"factor", f}});
        j["faults"] = fj;
      }
      // Per stage: activations alive at once in the timeline vs the schedule's statement.
      auto stages = nlohmann::json::array();
      for (size_t i = 0; i < s.peak_memory_bytes.size(); ++i)
        stages.push_back({{"stage", i},
                          {"peak_inflight_microbatches", s.peak_inflight_microbatches[i]},
                          {"schedule_inflight_microbatches", s.schedule_inflight_microbatches[i]},
                          {"peak_memory_gib", s.peak_memory_bytes[i] / (1024.0 * 1024 * 1024)}});
      j["simulated_memory"] = stages;
      j["framework"] = framework_to_json(fw);
      j["calibration_warnings"] = flags;
      j["warnings"] = warnings_to_json(fw);
      append_warnings(j["warnings"], warnings);
      fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      fmt::print("{}", estimate_to_text(r, s.estimate, FlopsConvention::kCausalHalf));
      fmt::print(
          "\nsimulated {} events on {} rank(s){}; closed-form step time {:.3f} s (the simulated "
          "step is {:+.2f}% against it)\n",
          s.events, s.ranks,
          ranks != "all"                ? " (one per stage)"
          : s.simulated_ranks < s.ranks ? fmt::format(" (every GPU: {} independent replica groups, "
                                                      "{} ranks simulated, the rest alike)",
                                                      s.replica_groups, s.simulated_ranks)
                                        : std::string(" (every GPU)"),
          s.analytic_step_s,
          100 * (s.estimate.step_time_s - s.analytic_step_s) / s.analytic_step_s);
      if (r.plan.pp == 1)
        fmt::print(
            "  (one pipeline stage: the simulator plays the closed form's per-micro-batch times "
            "in order; TP/CP/EP collectives and ZeRO-3's gathers keep the cost model's exposed "
            "times, only the gradient reduction is a flow on the network (docs/simulator.md), so "
            "agreement here checks the step's composition more than its collectives; a "
            "pipeline, --slow-gpu, --slow-link or --jitter is where the simulation adds "
            "information)\n");
      if (!faults.empty()) {
        fmt::print("\nfaults: step {:.3f} s against {:.3f} s without them ({:+.2f}%)\n",
                   s.estimate.step_time_s, clean_step_s,
                   100 * (s.estimate.step_time_s / clean_step_s - 1));
        for (const auto& [g, f] : faults.slow_gpus)
          fmt::print(
              "  GPU {} x{:g}: pipeline stage {}; its TP/CP group runs at its pace and the "
              "step waits for its replica\n",
              g, f, des::stage_of_rank(r.plan, g));
        for (const auto& [n, f] : faults.slow_links) fmt::print("  node {} NICs /{:g}\n", n, f);
        if (faults.jitter_sigma > 0)
          fmt::print("  jitter sigma {:g} (seed {}){}\n", faults.jitter_sigma, faults.seed,
                     ranks == "all" ? ""
                                    : "; with one rank per stage the data-parallel replicas' "
                                      "independent noise is not drawn (--ranks all draws it)");
      }
      fmt::print(
          "\nlive activations in the timeline (micro-batches held at once) and peak memory:\n");
      fmt::print("  {:>5} {:>10} {:>10} {:>12}\n", "stage", "simulated", "schedule", "peak GiB");
      for (size_t i = 0; i < s.peak_memory_bytes.size(); ++i)
        fmt::print("  {:>5} {:>10.2f} {:>10.2f} {:>12.2f}\n", i, s.peak_inflight_microbatches[i],
                   s.schedule_inflight_microbatches[i],
                   s.peak_memory_bytes[i] / (1024.0 * 1024 * 1024));
      fmt::print("{}{}", framework_to_text(fw),
                 warnings_to_text(warnings, flags, r.cluster.profile.name));
    }
    ctx.exit_code = 0;
  });
}

}  // namespace dtplan::cli
