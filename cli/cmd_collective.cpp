// dtplan collective: one collective on its own — time by algorithm with its latency (alpha)
// and bandwidth (beta) parts and the link that limits it, or a size sweep with crossovers.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/atomic_file.h"
#include "core/byte_size.h"
#include "core/catalog.h"
#include "core/error.h"
#include "core/registry.h"
#include "reports/escape.h"
#include "reports/svg_chart.h"
#include "simulator/cost/collective_study.h"

namespace dtplan::cli {

namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return fmt::format("{:.4g} {}", b, units[u]);
}

std::string human_time(double s) {
  if (s < 1e-3) return fmt::format("{:.2f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

nlohmann::json algorithm_json(const AlgorithmCost& a, CollectiveOp op, double bytes, int n) {
  const double t = a.time.time_s();
  const double algbw = bytes / t / 1e9;
  return {{"algorithm", a.algorithm},
          {"time_s", t},
          {"alpha_s", a.time.alpha_s},
          {"beta_s", a.time.beta_s},
          {"bottleneck", to_string(a.time.bottleneck)},
          {"algbw_gbps", algbw},
          {"busbw_gbps", algbw * (op == CollectiveOp::kSendRecv ? 1.0 : busbw_factor(op, n))},
          {"nccl", a.auto_selected}};
}

}  // namespace

void register_collective(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "collective",
      "One collective on its own: time, bus and algorithm bandwidth, latency and bandwidth "
      "parts and the limiting link per algorithm; --sweep for time against size");
  static std::string op_name = "all_reduce", bytes_text, cluster = "dgx-a100-80g", algorithm, sweep,
                     csv, out;
  static int gpus = 0, servers = 0, ranks_per_node = 0, concurrent = 1;
  static bool json = false;
  cmd->add_option("--op", op_name, "Operation")
      ->check(CLI::IsMember(
          {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"}))
      ->capture_default_str();
  cmd->add_option("--bytes", bytes_text,
                  "Message size S as nccl-tests counts it (the whole buffer; K/M/G/T are "
                  "binary multiples): e.g. 350e9, 256M");
  cmd->add_option("--gpus,-g", gpus, "Ranks in the group")
      ->required()
      ->check(CLI::Range(2, 1 << 22));
  cmd->add_option("--cluster,-c", cluster, "Hardware profile name/path or a cluster YAML")
      ->capture_default_str();
  cmd->add_option("--algorithm", algorithm,
                  "Price this algorithm only (dtplan list collectives); default: the fastest one "
                  "NCCL would pick (a calibrated table where the profile has one)");
  cmd->add_option("--servers", servers,
                  "Parameter servers serving this group, for --algorithm ps (default: one per node "
                  "of the group)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ranks-per-node", ranks_per_node,
                  "Ranks of the group on one node (NVLink domain); default: a whole node's GPUs")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--concurrent-groups", concurrent,
                  "Groups like this one sharing each node's NICs at once (e.g. 8 data-parallel "
                  "groups of one rank per node)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--sweep", sweep, "Sizes LO-HI doubling, e.g. 1K-16G");
  cmd->add_flag("--json", json, "Machine-readable output");
  cmd->add_option("--csv", csv, "With --sweep: write size, algorithm and times as CSV");
  cmd->add_option("--out", out, "With --sweep: write the chart (FILE.svg or FILE.html)")
      ->check([](const std::string& v) {
        const bool ok = (v.size() > 4 && v.substr(v.size() - 4) == ".svg") ||
                        (v.size() > 5 && v.substr(v.size() - 5) == ".html");
        return ok ? "" : "must end in .svg or .html";
      });
  cmd->footer(
      "Example: dtplan collective --op all_reduce --bytes 350e9 --gpus 128 --ranks-per-node 1 "
      "--concurrent-groups 8 --sweep 1K-16G (a 175B model's fp16 gradient over a data-parallel "
      "group of 128 nodes, one rank per node, beside the 7 other such groups of its nodes' GPUs).");
  cmd->callback([&ctx] {
    if (bytes_text.empty() && sweep.empty())
      throw InputError({}, "--bytes", "give the message size (--bytes) or a range (--sweep)");
    if ((!csv.empty() || !out.empty()) && sweep.empty())
      throw InputError({}, csv.empty() ? "--out" : "--csv", "needs --sweep LO-HI");
    CollectiveOp op = CollectiveOp::kAllReduce;
    for (auto o : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                   CollectiveOp::kAllToAll, CollectiveOp::kBroadcast, CollectiveOp::kSendRecv})
      if (op_name == to_string(o)) op = o;
    if (op == CollectiveOp::kSendRecv && gpus != 2)
      throw InputError({}, "--gpus", "send_recv is between 2 ranks");
    HardwareProfile hw = load_cluster(cluster, gpus).profile;
    if (servers > 0) {
      if (algorithm != "ps")
        throw InputError({}, "--servers", "applies to --algorithm ps (the parameter server)");
      hw.parameter_servers = servers;
    }
    if (!algorithm.empty()) {
      const auto* e = [&]() -> const Registry<ICollectiveAlgorithm>::Entry* {
        for (const auto& x : Registry<ICollectiveAlgorithm>::global().entries())
          if (x.name == algorithm) return &x;
        return nullptr;
      }();
      if (!e)
        throw InputError(
            {}, "--algorithm",
            fmt::format("unknown algorithm '{}' (dtplan list collectives)", algorithm));
      if (!e->instance->supports(op))
        throw InputError({}, "--algorithm",
                         fmt::format("{} does not implement {}", algorithm, op_name));
      hw.collective_algorithm = algorithm;
      hw.calibration.collectives.clear();  // price the algorithm, not the measured table
    }
    const int domain = hw.node.placement_domain_gpus();
    const char* unit = domain > hw.node.gpus_per_node ? "NVLink domain" : "node";
    if (ranks_per_node > domain)
      throw InputError({}, "--ranks-per-node",
                       fmt::format("{} exceeds the {} GPUs of one {} {}", ranks_per_node, domain,
                                   hw.name, unit));
    const GroupPlacement g = collective_placement(hw, gpus, ranks_per_node, concurrent);
    if (gpus % g.ranks_per_node != 0)
      throw InputError({}, "--gpus",
                       fmt::format("{} ranks do not fill {}s of {} evenly (give --ranks-per-node "
                                   "a divisor of {})",
                                   gpus, unit, g.ranks_per_node, gpus));
    if (g.ranks_per_node * concurrent > domain)
      throw InputError({}, "--concurrent-groups",
                       fmt::format("{} groups of {} rank(s) per {} need {} GPUs; one {} {} has {}",
                                   concurrent, g.ranks_per_node, unit,
                                   g.ranks_per_node * concurrent, hw.name, unit, domain));
    auto refuse_unpriced = [&](double at_bytes, const GroupPlacement& gp) {
      if (algorithm.empty()) return;
      for (const auto& a : collective_cost_by_algorithm(hw, op, at_bytes, gp))
        if (a.algorithm == algorithm) return;
      throw InputError({}, "--algorithm",
                       fmt::format("{} cannot run {} on this placement ({} rank(s) per {} on {} "
                                   "{}s; hierarchical needs several of each)",
                                   algorithm, op_name, gp.ranks_per_node, unit, gp.nodes, unit));
    };
    double lo = 0, hi = 0;
    if (!sweep.empty()) {
      const auto dash = sweep.find('-');
      if (dash == std::string::npos)
        throw InputError({}, "--sweep", fmt::format("'{}' is not LO-HI (e.g. 1K-16G)", sweep));
      lo = parse_byte_size("--sweep", sweep.substr(0, dash));
      hi = parse_byte_size("--sweep", sweep.substr(dash + 1));
      if (hi < lo) throw InputError({}, "--sweep", "HI is smaller than LO");
      if (std::log2(hi / lo) > 64)
        throw InputError({}, "--sweep", "more than 64 doublings from LO to HI");
    }
    const double bytes = bytes_text.empty() ? hi : parse_byte_size("--bytes", bytes_text);
    refuse_unpriced(bytes, g);
    const CollectivePoint p = collective_point(hw, op, bytes, g);
    const AlgorithmCost* sel = nullptr;
    for (const auto& a : p.algorithms)
      if (a.algorithm == p.selected.algorithm) sel = &a;
    CollectiveSweep sw;
    if (!sweep.empty()) sw = collective_sweep(hw, op, lo, hi, g);

    // Per algorithm over the sweep (the order of the registry).
    std::vector<std::string> names;
    if (!sweep.empty())
      for (const auto& a : sw.points.front().algorithms) names.push_back(a.algorithm);
    auto at = [](const CollectivePoint& q, const std::string& name) -> const AlgorithmCost* {
      for (const auto& a : q.algorithms)
        if (a.algorithm == name) return &a;
      return nullptr;
    };
    if (json) {
      nlohmann::json j = {{"op", op_name},
                          {"bytes", bytes},
                          {"gpus", gpus},
                          {"profile", hw.name},
                          {"placement",
                           {{"ranks_per_node", g.ranks_per_node},
                            {"nodes", g.nodes},
                            {"node_gpus_busy", g.node_gpus_busy}}},
                          {"algorithm", p.selected.algorithm},
                          {"time_s", p.selected.time_s},
                          {"algbw_gbps", p.algbw_gbps},
                          {"busbw_gbps", p.busbw_gbps},
                          // A calibrated table is measured whole: all of it counts as beta.
                          {"alpha_s", sel ? sel->time.alpha_s : 0.0},
                          {"beta_s", sel ? sel->time.beta_s : p.selected.time_s},
                          {"bottleneck", sel ? to_string(sel->time.bottleneck) : "measured"}};
      nlohmann::json algs = nlohmann::json::array();
      for (const auto& a : p.algorithms) algs.push_back(algorithm_json(a, op, bytes, gpus));
      j["algorithms"] = algs;
      if (!sweep.empty()) {
        nlohmann::json s = nlohmann::json::array();
        for (const auto& name : names) {
          nlohmann::json pts = nlohmann::json::array();
          for (const auto& q : sw.points)
            if (const auto* a = at(q, name)) {
              nlohmann::json e = algorithm_json(*a, op, q.bytes, gpus);
              e.erase("algorithm");
              e.erase("nccl");
              e["bytes"] = q.bytes;
              pts.push_back(e);
            }
          s.push_back({{"algorithm", name}, {"points", pts}});
        }
        j["sweep"] = s;
        nlohmann::json c = nlohmann::json::array();
        for (const auto& x : sw.crossovers)
          c.push_back({{"bytes", x.bytes}, {"from", x.from}, {"to", x.to}});
        j["crossovers"] = c;
      }
      fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      fmt::print("{} of {} ({:.0f} B) on {} GPUs of {}: {} per {} on {} {}(s)\n", op_name,
                 human_bytes(bytes), bytes, gpus, hw.name, g.ranks_per_node, unit, g.nodes, unit);
      fmt::print("  {:<13} {:>12} {:>12} {:>12} {:>11} {:>11}  {}\n", "algorithm", "time", "alpha",
                 "beta", "algbw GB/s", "busbw GB/s", "bottleneck");
      for (const auto& a : p.algorithms) {
        const double t = a.time.time_s(), algbw = bytes / t / 1e9;
        fmt::print("  {:<13} {:>12} {:>12} {:>12} {:>11.2f} {:>11.2f}  {}{}\n", a.algorithm,
                   human_time(t), human_time(a.time.alpha_s), human_time(a.time.beta_s), algbw,
                   algbw * (op == CollectiveOp::kSendRecv ? 1.0 : busbw_factor(op, gpus)),
                   to_string(a.time.bottleneck), a.auto_selected ? "" : " (not run by NCCL)");
      }
      fmt::print("  charged by the cost model: {} ({}), busbw {:.2f} GB/s\n",
                 human_time(p.selected.time_s), p.selected.algorithm, p.busbw_gbps);
      if (!sweep.empty()) {
        fmt::print("\nsweep {} to {} (time per algorithm; * fastest of NCCL's)\n", human_bytes(lo),
                   human_bytes(hi));
        fmt::print("  {:>12}", "size");
        for (const auto& n : names) fmt::print(" {:>13}", n);
        fmt::print("\n");
        for (const auto& q : sw.points) {
          fmt::print("  {:>12}", human_bytes(q.bytes));
          double best = 1e300;  // of NCCL's algorithms (the ones the cost model may pick)
          for (const auto& a : q.algorithms)
            if (a.auto_selected) best = std::min(best, a.time.time_s());
          for (const auto& n : names) {
            const auto* a = at(q, n);
            fmt::print(" {:>13}", a ? human_time(a->time.time_s()) +
                                          (a->auto_selected && a->time.time_s() <= best ? "*" : " ")
                                    : "-");
          }
          fmt::print("\n");
        }
        for (const auto& x : sw.crossovers)
          fmt::print("  crossover: {} is fastest from {} (was {})\n", x.to, human_bytes(x.bytes),
                     x.from);
        if (sw.crossovers.empty() && !names.empty())
          fmt::print("  no crossover: the same algorithm is fastest at every size\n");
      }
    }
    std::fflush(stdout);
    if (!csv.empty()) {
      std::string text = "bytes,algorithm,time_s,alpha_s,beta_s,busbw_gbps,bottleneck\n";
      for (const auto& q : sw.points)
        for (const auto& a : q.algorithms) {
          const double t = a.time.time_s();
          text += fmt::format(
              "{:.0f},{},{:.9g},{:.9g},{:.9g},{:.6g},{}\n", q.bytes, a.algorithm, t, a.time.alpha_s,
              a.time.beta_s,
              q.bytes / t / 1e9 * (op == CollectiveOp::kSendRecv ? 1.0 : busbw_factor(op, gpus)),
              to_string(a.time.bottleneck));
        }
      write_file_atomic(csv, text);
      fmt::print(stderr, "wrote {}\n", csv);
    }
    if (!out.empty()) {
      reports::LineChart chart;
      chart.title = fmt::format("{} on {} GPUs of {} ({} per node)", op_name, gpus, hw.name,
                                g.ranks_per_node);
      chart.x_label = "message size (bytes)";
      chart.y_label = "time (s)";
      for (const auto& n : names) {
        reports::LineSeries s{n, {}};
        for (const auto& q : sw.points)
          if (const auto* a = at(q, n)) s.points.emplace_back(q.bytes, a->time.time_s());
        chart.series.push_back(std::move(s));
      }
      for (const auto& x : sw.crossovers)
        chart.markers.emplace_back(x.bytes, fmt::format("{} -> {}", x.from, x.to));
      std::string svg = reports::line_chart_svg(chart);
      if (out.substr(out.size() - 5) == ".html")
        svg = fmt::format(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>"
            "</head><body>\n{}\n<p>Crossovers are the first swept size where another algorithm "
            "is fastest. Times from dtplan's collective cost model (docs/collectives.md).</p>"
            "</body></html>\n",
            reports::html_escape(chart.title), svg);
      write_file_atomic(out, svg);
      fmt::print(stderr, "wrote {}\n", out);
    }
    ctx.exit_code = 0;
  });
}

}  // namespace dtplan::cli
