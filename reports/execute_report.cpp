#include "reports/execute_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "reports/escape.h"
#include "reports/html_page.h"

namespace dtplan::reports {

namespace {

struct ClassRow {
  const char* name;
  double measured_s, predicted_s;
  int count;
};

// Per op class, the mean over ranks of the last step's time.
std::vector<ClassRow> class_rows(const exec::ExecResult& r) {
  std::vector<ClassRow> rows;
  const double n = static_cast<double>(std::max<size_t>(1, r.per_rank.size()));
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

std::string shape(const exec::GemmShapeTimes& g) {
  return fmt::format("{}x{}x{} ({}, {})", g.m, g.n, g.k, g.count, to_string(g.precision));
}

constexpr double kGB = 1e9;
constexpr size_t kShapesShown = 12;

}  // namespace

std::string execute_json(const exec::ExecResult& r, const Plan& p) {
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
                                {"precision", to_string(g.precision)},
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
  return j.dump(2);
}

std::string execute_text(const exec::ExecResult& r, const Plan& p) {
  std::string o;
  auto out = std::back_inserter(o);
  fmt::format_to(out, "dtplan execute: {} on {} of the plan's {} GPU(s), backend {} ({})\n",
                 r.model.name, r.ranks, r.plan_ranks, r.backend, r.device);
  fmt::format_to(out, "plan: {}\n\n", p.describe());
  fmt::format_to(out, "{:<14} {:>12} {:>14} {:>8}\n", "", "measured", "predicted", "ratio");
  fmt::format_to(out, "{:<14} {:>10.4f} s {:>12.4f} s {:>8}   (closed form; simulated {:.4f} s)\n",
                 "step time", r.measured_step_s, r.predicted_step_s,
                 ratio(r.measured_step_s, r.predicted_step_s), r.predicted_step_sim_s);
  fmt::format_to(out, "{:<14} {:>9.3f} GB {:>11.3f} GB {:>8}\n\n", "peak memory",
                 r.measured_peak_bytes / kGB, r.predicted_peak_bytes / kGB,
                 ratio(r.measured_peak_bytes, r.predicted_peak_bytes));
  o += "per op class, mean over ranks of the last step:\n";
  fmt::format_to(out, "  {:<12} {:>7} {:>12} {:>12} {:>8}\n", "class", "ops", "measured s",
                 "predicted s", "ratio");
  for (const auto& c : class_rows(r))
    fmt::format_to(out, "  {:<12} {:>7} {:>12.5f} {:>12.5f} {:>8}\n", c.name, c.count, c.measured_s,
                   c.predicted_s, ratio(c.measured_s, c.predicted_s));
  std::string worst;
  for (const auto& c : discrepancies(class_rows(r)))
    worst += fmt::format("{}{} ({:+.4f} s)", worst.empty() ? "" : ", ", c.name,
                         c.measured_s - c.predicted_s);
  fmt::format_to(out, "largest discrepancies: {}\n\n", worst);
  o += "GEMM shapes by measured time (per GPU; one call, every rank's calls):\n";
  fmt::format_to(out, "  {:>28} {:>6} {:>13} {:>13} {:>8}\n", "M x N x K (copies, precision)",
                 "calls", "measured ms", "predicted ms", "ratio");
  for (size_t i = 0; i < r.gemm_shapes.size() && i < kShapesShown; ++i) {
    const auto& g = r.gemm_shapes[i];
    fmt::format_to(out, "  {:>28} {:>6} {:>13.4f} {:>13.4f} {:>8}\n", shape(g), g.calls,
                   1e3 * g.measured_s / g.calls, 1e3 * g.predicted_s / g.calls,
                   ratio(g.measured_s, g.predicted_s));
  }
  o += "\nper rank:\n";
  fmt::format_to(out, "  {:>4} {:>5} {:>12} {:>12} {:>14} {:>16}\n", "rank", "stage", "step s",
                 "peak GB", "predicted GB", "modelled ops (s)");
  for (const auto& pr : r.per_rank)
    fmt::format_to(out, "  {:>4} {:>5} {:>12.4f} {:>12.3f} {:>14.3f} {:>16}\n", pr.rank, pr.stage,
                   pr.step_s.empty() ? 0.0 : pr.step_s.back(), pr.peak_bytes / kGB,
                   pr.predicted_peak_bytes / kGB,
                   fmt::format("{} ({:.4f})", pr.modelled_ops, pr.modelled_s));
  o += "\nhow it ran:\n";
  for (const auto& n : r.notes) fmt::format_to(out, "  - {}\n", n);
  fmt::format_to(out, "  - software: {}\n", r.software);
  return o;
}

namespace {

std::string markdown(const exec::ExecResult& r, const Plan& p) {
  std::string o;
  auto out = std::back_inserter(o);
  auto c = [](std::string_view s) { return markdown_cell(s); };
  fmt::format_to(out, "# dtplan execute: {}\n\n", c(r.model.name));
  fmt::format_to(out, "Plan {} on {} of its {} GPUs, backend `{}` ({}).\n\n", c(p.describe()),
                 r.ranks, r.plan_ranks, c(r.backend), c(r.device));
  o += "| | measured | predicted | ratio |\n| --- | ---: | ---: | ---: |\n";
  fmt::format_to(out, "| step | {:.4f} s | {:.4f} s (simulated {:.4f} s) | {} |\n",
                 r.measured_step_s, r.predicted_step_s, r.predicted_step_sim_s,
                 ratio(r.measured_step_s, r.predicted_step_s));
  fmt::format_to(out, "| peak memory | {:.3f} GB | {:.3f} GB | {} |\n\n",
                 r.measured_peak_bytes / kGB, r.predicted_peak_bytes / kGB,
                 ratio(r.measured_peak_bytes, r.predicted_peak_bytes));
  o += "## Op classes (mean over ranks, last step)\n\n| class | ops | measured (s) | predicted "
       "(s) | ratio |\n| --- | ---: | ---: | ---: | ---: |\n";
  for (const auto& x : class_rows(r))
    fmt::format_to(out, "| {} | {} | {:.5f} | {:.5f} | {} |\n", x.name, x.count, x.measured_s,
                   x.predicted_s, ratio(x.measured_s, x.predicted_s));
  o += "\n## GEMM shapes (per GPU, one call)\n\n| M x N x K (copies, precision) | calls | "
       "measured (ms) | predicted (ms) | ratio |\n| --- | ---: | ---: | ---: | ---: |\n";
  for (size_t i = 0; i < r.gemm_shapes.size() && i < kShapesShown; ++i) {
    const auto& g = r.gemm_shapes[i];
    fmt::format_to(out, "| {} | {} | {:.4f} | {:.4f} | {} |\n", shape(g), g.calls,
                   1e3 * g.measured_s / g.calls, 1e3 * g.predicted_s / g.calls,
                   ratio(g.measured_s, g.predicted_s));
  }
  o += "\n## Per rank\n\n| rank | stage | host | step (s) | peak (GB) | predicted (GB) | modelled "
       "ops |\n| ---: | ---: | --- | ---: | ---: | ---: | ---: |\n";
  for (const auto& pr : r.per_rank)
    fmt::format_to(out, "| {} | {} | {} | {:.4f} | {:.3f} | {:.3f} | {} |\n", pr.rank, pr.stage,
                   c(pr.host), pr.step_s.empty() ? 0.0 : pr.step_s.back(), pr.peak_bytes / kGB,
                   pr.predicted_peak_bytes / kGB, pr.modelled_ops);
  o += "\n## How it ran\n\n";
  for (const auto& n : r.notes) fmt::format_to(out, "- {}\n", c(n));
  fmt::format_to(out, "- software: {}\n", c(r.software));
  o += "\n## Source\n\n```json\n" + json_for_script(execute_json(r, p)) + "\n```\n";
  return o;
}

std::string html(const exec::ExecResult& r, const Plan& p) {
  std::string o;
  auto out = std::back_inserter(o);
  auto e = [](std::string_view s) { return html_escape(s); };
  html_head(o, "dtplan execute: " + r.model.name);
  fmt::format_to(out,
                 "<h1>dtplan execute: {}</h1><p class=\"sub\">Plan {} on {} of its {} GPUs, "
                 "backend {} ({})</p>\n",
                 e(r.model.name), e(p.describe()), r.ranks, r.plan_ranks, e(r.backend),
                 e(r.device));
  fmt::format_to(out,
                 "<div class=\"cards\"><div class=\"card\">step measured<b>{:.4f} s</b>predicted "
                 "{:.4f} s ({})</div><div class=\"card\">peak memory<b>{:.3f} GB</b>predicted "
                 "{:.3f} GB ({})</div></div>\n",
                 r.measured_step_s, r.predicted_step_s,
                 ratio(r.measured_step_s, r.predicted_step_s), r.measured_peak_bytes / kGB,
                 r.predicted_peak_bytes / kGB,
                 ratio(r.measured_peak_bytes, r.predicted_peak_bytes));
  o += "<h2>Op classes</h2><p>Mean over ranks of the last step.</p><table><tr><th "
       "class=\"l\">class</th><th>ops</th><th>measured (s)</th><th>predicted (s)</th>"
       "<th>ratio</th></tr>\n";
  for (const auto& x : class_rows(r))
    fmt::format_to(out,
                   "<tr><td class=\"l\">{}</td><td>{}</td><td>{:.5f}</td><td>{:.5f}</td>"
                   "<td>{}</td></tr>\n",
                   x.name, x.count, x.measured_s, x.predicted_s,
                   ratio(x.measured_s, x.predicted_s));
  o += "</table><h2>GEMM shapes</h2><p>Per GPU after sharding; the time of one call over every "
       "rank's calls.</p><table><tr><th class=\"l\">M x N x K (copies, precision)</th><th>calls"
       "</th><th>measured (ms)</th><th>predicted (ms)</th><th>ratio</th></tr>\n";
  for (size_t i = 0; i < r.gemm_shapes.size() && i < kShapesShown; ++i) {
    const auto& g = r.gemm_shapes[i];
    fmt::format_to(out,
                   "<tr><td class=\"l\">{}</td><td>{}</td><td>{:.4f}</td><td>{:.4f}</td><td>{}"
                   "</td></tr>\n",
                   shape(g), g.calls, 1e3 * g.measured_s / g.calls, 1e3 * g.predicted_s / g.calls,
                   ratio(g.measured_s, g.predicted_s));
  }
  o += "</table><h2>Per rank</h2><table><tr><th>rank</th><th>stage</th><th class=\"l\">host</th>"
       "<th>step (s)</th><th>peak (GB)</th><th>predicted (GB)</th><th>modelled ops</th></tr>\n";
  for (const auto& pr : r.per_rank)
    fmt::format_to(out,
                   "<tr><td>{}</td><td>{}</td><td class=\"l\">{}</td><td>{:.4f}</td><td>{:.3f}"
                   "</td><td>{:.3f}</td><td>{}</td></tr>\n",
                   pr.rank, pr.stage, e(pr.host), pr.step_s.empty() ? 0.0 : pr.step_s.back(),
                   pr.peak_bytes / kGB, pr.predicted_peak_bytes / kGB, pr.modelled_ops);
  o += "</table><h2>How it ran</h2><ul>\n";
  for (const auto& n : r.notes) fmt::format_to(out, "<li>{}</li>\n", e(n));
  fmt::format_to(out, "<li>software: {}</li></ul>\n", e(r.software));
  html_tail(o, execute_json(r, p));
  return o;
}

}  // namespace

std::string render_execute(const exec::ExecResult& r, const Plan& p, Format f) {
  return f == Format::kHtml ? html(r, p) : markdown(r, p);
}

}  // namespace dtplan::reports
