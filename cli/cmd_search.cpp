#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/estimate_json.h"
#include "cli/options.h"
#include "core/atomic_file.h"
#include "core/catalog.h"
#include "core/error.h"
#include "planner/search.h"
#include "simulator/analytic/estimator.h"

namespace dtplan::cli {

namespace {

// "8", "2,4,8" or "4-16" (every integer in the range; the search keeps the feasible ones).
std::vector<int> parse_int_set(const std::string& text, const std::string& flag) {
  std::vector<int> out;
  if (text.empty()) return out;
  std::stringstream ss(text);
  std::string item;
  auto to_int = [&](const std::string& s) {
    try {
      size_t used = 0;
      const int v = std::stoi(s, &used);
      if (used != s.size() || v < 0) throw std::invalid_argument(s);
      return v;
    } catch (const std::exception&) {
      throw InputError({}, flag,
                       fmt::format("'{}' is not a non-negative integer, a list (2,4,8) "
                                   "or a range (4-16)",
                                   text));
    }
  };
  while (std::getline(ss, item, ',')) {
    const auto dash = item.find('-');
    if (dash == std::string::npos) {
      out.push_back(to_int(item));
    } else {
      const int lo = to_int(item.substr(0, dash)), hi = to_int(item.substr(dash + 1));
      if (lo > hi || hi - lo > 100000)
        throw InputError({}, flag, fmt::format("range '{}' is empty or too wide", item));
      for (int v = lo; v <= hi; ++v) out.push_back(v);
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string layout(const Plan& p) {
  return fmt::format("{:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>3} {:>4} {:>9} {:>4} {:<11}", p.tp,
                     p.pp, p.cp, p.ep, p.dp, p.vpp, p.sp ? "on" : "-", p.zero,
                     to_string(p.recompute), p.mbs, p.pp > 1 ? p.schedule : "-");
}

}  // namespace

void register_search(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("search", "Search every feasible parallel layout and rank them");
  static SpecOptions spec;
  static std::string tp, pp, cp, ep, etp, vpp, mbs, zero, recompute, schedule, sp = "auto";
  static std::string objective = "step_time", framework = "megatron", csv, out, precision = "bf16";
  static int64_t gbs = 0, gbs_tokens = 0, seq = 2048;
  static int top = 10, threads = 0, refine = 0;
  static double margin = 0.10;
  static bool cross_node_tp = false, json = false;
  add_spec_options(*cmd, spec);
  const char* g = "Search space (pins narrow it: 8, 2,4,8 or 4-16)";
  cmd->add_option("--tp", tp, "Tensor-parallel sizes")->group(g);
  cmd->add_option("--pp", pp, "Pipeline-parallel sizes")->group(g);
  cmd->add_option("--cp", cp, "Context-parallel sizes")->group(g);
  cmd->add_option("--ep", ep, "Expert-parallel sizes")->group(g);
  cmd->add_option("--etp", etp, "Expert tensor-parallel sizes")->group(g);
  cmd->add_option("--vpp", vpp, "Virtual pipeline stages")->group(g);
  cmd->add_option("--mbs", mbs, "Micro-batch sizes (default 1,2,4,8,16)")->group(g);
  cmd->add_option("--zero", zero, "ZeRO stages (default 0-3)")->group(g);
  cmd->add_option("--recompute", recompute, "none,selective,full (default all)")->group(g);
  cmd->add_option("--schedule", schedule, "Pipeline schedules (default all registered)")->group(g);
  cmd->add_option("--sp", sp, "Sequence parallelism: auto (with TP), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->group(g);
  const char* wg = "Workload";
  cmd->add_option("--gbs,--global-batch-size", gbs, "Global batch (sequences)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->group(wg);
  cmd->add_option("--gbs-tokens", gbs_tokens, "Global batch in tokens")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50))
      ->excludes("--gbs")
      ->group(wg);
  cmd->add_option("--seq,--seq-length", seq, "Sequence length")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str()
      ->group(wg);
  cmd->add_option("--precision", precision, "Training precision")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8"}))
      ->capture_default_str()
      ->group(wg);
  cmd->add_option("--top", top, "How many plans to rank")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--objective", objective, "step_time | cost | mfu | memory")
      ->check(CLI::IsMember(objective_names()))
      ->capture_default_str();
  cmd->add_option("--memory-margin", margin, "Share of HBM kept free")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  cmd->add_option("--framework", framework, "Refuse what this framework cannot express")
      ->check(CLI::IsMember(framework_names()))
      ->capture_default_str();
  cmd->add_flag("--allow-cross-node-tp", cross_node_tp, "Allow TP beyond the NVLink domain");
  cmd->add_option("--refine", refine, "Re-rank the best K plans with the discrete-event simulator")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--threads", threads, "Search threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->add_option("--csv", csv,
                  "Also write the ranked plans as CSV (NeMo auto-configurator columns)");
  cmd->add_option("--out,-o", out, "Write the output to this file (atomically)");
  cmd->footer(
      "With no model or cluster flag, searches the built-in example: GPT-3 175B on 32 DGX A100 "
      "80GB nodes (256 GPUs), batch 1536 x 2048 tokens.");
  cmd->callback([&ctx, cmd] {
    if (cmd->count("--model") + cmd->count("--cluster") + cmd->count("--gpus") == 0) {
      spec.model = "gpt3-175b";
      spec.cluster = "dgx-a100-80g";
      spec.gpus = 256;
      if (gbs == 0 && gbs_tokens == 0) gbs = 1536;
      fmt::print(stderr,
                 "dtplan search: no model or cluster given; using the built-in example "
                 "(see --help)\n");
    }
    ModelSpec model = load_model(spec.model);
    Cluster cluster = load_cluster(spec.cluster, spec.gpus);
    Workload w;
    w.seq_len = seq;
    w.precision = *parse_precision(precision);
    w.global_batch = gbs > 0 ? gbs : 1536;
    if (gbs_tokens > 0) {
      if (gbs_tokens % seq != 0)
        throw InputError({}, "--gbs-tokens",
                         fmt::format("{} tokens are not a whole number of "
                                     "sequences of {}",
                                     gbs_tokens, seq));
      w.global_batch = gbs_tokens / seq;
    }
    SearchSpace space;
    space.tp = parse_int_set(tp, "--tp");
    space.pp = parse_int_set(pp, "--pp");
    space.cp = parse_int_set(cp, "--cp");
    space.ep = parse_int_set(ep, "--ep");
    space.etp = parse_int_set(etp, "--etp");
    space.vpp = parse_int_set(vpp, "--vpp");
    space.mbs = parse_int_set(mbs, "--mbs");
    space.zero = parse_int_set(zero, "--zero");
    for (int z : space.zero)
      if (z > 3)
        throw InputError({}, "--zero", fmt::format("ZeRO stage {} does not exist (0-3)", z));
    for (const auto& r : split(recompute)) {
      if (r == "none")
        space.recompute.push_back(Recompute::kNone);
      else if (r == "selective")
        space.recompute.push_back(Recompute::kSelective);
      else if (r == "full")
        space.recompute.push_back(Recompute::kFull);
      else
        throw InputError({}, "--recompute", fmt::format("'{}' is not none, selective or full", r));
    }
    const auto names = schedule_names();
    for (const auto& s : split(schedule)) {
      if (std::find(names.begin(), names.end(), s) == names.end())
        throw InputError({}, "--schedule",
                         fmt::format("unknown schedule '{}'{}", s,
                                     did_you_mean(s, std::span<const std::string>(names))));
      space.schedules.push_back(s);
    }
    if (sp != "auto") space.sp = sp == "on";
    SearchOptions opt;
    opt.objective = static_cast<Objective>(
        std::find(objective_names().begin(), objective_names().end(), objective) -
        objective_names().begin());
    opt.top_k = top;
    opt.memory_margin = margin;
    opt.framework = parse_framework(framework);
    opt.allow_cross_node_tp = cross_node_tp;
    opt.threads = threads;
    if (opt.objective == Objective::kCost && !cluster.profile.usd_per_gpu_hour)
      fmt::print(stderr, "dtplan search: profile {} has no price; cost is in GPU-hours per step\n",
                 cluster.profile.name);

    // Progress bar with ETA on a terminal, for searches that run past a second; silent when
    // stderr is piped or redirected.
    const auto started = std::chrono::steady_clock::now();
    bool drew = false;
    if (isatty(STDERR_FILENO)) {
      opt.progress = [&](double done) {
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (elapsed < 1.0 || done <= 0) return;
        const int width = 30, filled = static_cast<int>(done * width);
        fmt::print(stderr, "\r  searching [{}{}] {:3.0f}%  ETA {:.0f} s ", std::string(filled, '#'),
                   std::string(width - filled, ' '), 100 * done, elapsed * (1 - done) / done);
        drew = true;
      };
    }
    AnalyticEvaluator evaluator;
    SearchResult r = search(model, cluster, w, space, opt, evaluator);
    if (drew) fmt::print(stderr, "\r{}\r", std::string(60, ' '));
    if (refine > 0) refine_top(r, model, cluster, w, opt, DesEvaluator{}, refine);

    std::string text;
    auto o = std::back_inserter(text);
    const double gib = units::kGiB;
    if (json) {
      nlohmann::json j;
      j["model"] = model.name;
      j["cluster"] = {{"profile", cluster.profile.name}, {"gpus", cluster.num_gpus}};
      j["workload"] = {{"seq", w.seq_len}, {"gbs", w.global_batch}, {"precision", precision}};
      j["objective"] = objective;
      j["evaluator"] = evaluator.name();
      j["refined_with_des"] = refine;
      j["framework"] = framework;
      j["stats"] = {{"enumerated", r.enumerated}, {"evaluated", r.evaluated},
                    {"feasible", r.feasible},     {"exhausted", r.exhausted},
                    {"elapsed_s", r.elapsed_s},   {"plans_per_s", r.plans_per_s()},
                    {"threads", r.threads}};
      nlohmann::json rej = nlohmann::json::array();
      for (int k = 0; k < kNumRejections; ++k)
        if (r.rejected[static_cast<size_t>(k)] > 0)
          rej.push_back({{"reason", describe(static_cast<Rejection>(k))},
                         {"count", r.rejected[static_cast<size_t>(k)]},
                         {"example", r.example[static_cast<size_t>(k)]}});
      j["rejected"] = rej;
      auto cand_json = [&](const Candidate& c, int rank) {
        Resolved res{model, cluster, w, c.plan};
        nlohmann::json cj = estimate_to_json(res, c.estimate, FlopsConvention::kCausalHalf);
        cj["rank"] = rank;
        cj["objective_value"] = c.objective;
        return cj;
      };
      j["top"] = nlohmann::json::array();
      for (size_t i = 0; i < r.top.size(); ++i)
        j["top"].push_back(cand_json(r.top[i], static_cast<int>(i + 1)));
      j["pareto"] = nlohmann::json::array();
      for (const auto& c : r.pareto)
        j["pareto"].push_back({{"layout", c.plan.describe()},
                               {"step_time_s", c.estimate.step_time_s},
                               {"peak_memory_gib", c.estimate.memory_peak.total_bytes() / gib}});
      text = j.dump(2) + "\n";
    } else {
      fmt::format_to(
          o, "{} on {} x {} ({}), batch {} x {} tokens, {}; objective {}, framework {}\n",
          model.display_name, cluster.num_gpus, cluster.profile.gpu.name, cluster.profile.name,
          w.global_batch, w.seq_len, precision, objective, framework);
      fmt::format_to(
          o,
          "enumerated {} plans in {:.2f} s ({:.0f} plans/s on {} threads), evaluated {}, "
          "feasible {}, space {}\n\n",
          r.enumerated, r.elapsed_s, r.plans_per_s(), r.threads, r.evaluated, r.feasible,
          r.exhausted ? "exhausted" : "NOT exhausted");
      if (r.top.empty()) {
        fmt::format_to(o, "no feasible plan: see the rejections below\n");
      } else {
        fmt::format_to(o,
                       "{:>4}  {:>3} {:>3} {:>3} {:>3} {:>4} {:>3} {:>3} {:>4} {:>9} {:>4} {:<11} "
                       "{:>9} {:>6} {:>9} {:>8} {:>6} {:>7}\n",
                       "rank", "TP", "PP", "CP", "EP", "DP", "VPP", "SP", "ZeRO", "recompute",
                       "MBS", "schedule", "step (s)", "MFU", "tok/s/GPU", "peak GiB", "comm%",
                       "bubble%");
        for (size_t i = 0; i < r.top.size(); ++i) {
          const Candidate& c = r.top[i];
          fmt::format_to(o, "{:>4}  {} {:>9.3f} {:>5.1f}% {:>9.0f} {:>8.1f} {:>5.1f}% {:>6.1f}%\n",
                         i + 1, layout(c.plan), c.estimate.step_time_s, 100 * c.estimate.mfu,
                         c.estimate.tokens_per_s_per_gpu,
                         c.estimate.memory_peak.total_bytes() / gib, 100 * c.estimate.comm_share,
                         100 * c.estimate.bubble_fraction);
        }
        fmt::format_to(o, "\nPareto front (step time vs peak memory):\n");
        for (const auto& c : r.pareto)
          fmt::format_to(o, "  {:>9.3f} s {:>7.1f} GiB  {}\n", c.estimate.step_time_s,
                         c.estimate.memory_peak.total_bytes() / gib, c.plan.describe());
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
            model.name, params_b, w.seq_len, p.tp, p.pp, p.cp, p.ep, p.dp, p.mbs, p.vpp,
            model.layers, model.hidden, model.ffn_hidden, w.global_batch, cluster.nodes(),
            cluster.profile.node.gpus_per_node, p.zero, to_string(p.recompute),
            p.pp > 1 ? p.schedule : "none", e.step_time_s,
            static_cast<double>(w.global_batch) / e.step_time_s, e.model_tflops_per_gpu,
            e.model_tflops_per_gpu * cluster.num_gpus, e.mfu, e.memory_peak.total_bytes() / gib);
      }
      write_file_atomic(csv, c);
      fmt::print(stderr, "wrote {}\n", csv);
    }
    write_output(text, out);
    ctx.exit_code = r.top.empty() ? 2 : 0;
  });
}

}  // namespace dtplan::cli
