// The HTML format of reports and what-if studies (renderers.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "reports/derivations.h"
#include "reports/escape.h"
#include "reports/html_page.h"
#include "reports/renderers.h"
#include "reports/report_builder.h"
#include "reports/svg_chart.h"
#include "reports/uncertainty.h"

namespace dtplan::reports {

namespace {

constexpr const char* kCss = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1200px;padding:0 16px;color:#1a1a1a}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc;padding-bottom:3px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f0f0f0}td.l,th.l{text-align:left}.sub{color:#555}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}.card{border:1px solid #ccc;border-radius:6px;padding:8px 12px;min-width:140px}
.card b{display:block;font-size:20px}.better{background:#d9f2dd}.worse{background:#fbdcdc}
figure{margin:12px 0;page-break-inside:avoid;break-inside:avoid}figcaption{color:#555;font-size:12px}
code,pre{font:12px ui-monospace,Menlo,Consolas,monospace}pre{background:#f6f6f6;padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap}
details{margin:8px 0}
@media print{body{margin:0;max-width:none}pre{max-height:none}h2{page-break-after:avoid}}
)";

std::string e(std::string_view s) { return html_escape(s); }

std::string f3(double v) { return fmt::format("{:.3f}", v); }

}  // namespace

void html_head(std::string& o, const std::string& title) {
  fmt::format_to(std::back_inserter(o),
                 "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                 "<meta name=\"generator\" content=\"dtplan\"><title>{}</title><style>{}</style>"
                 "</head><body>\n",
                 e(title), kCss);
}

void html_tail(std::string& o, const std::string& json) {
  o += "<h2 id=\"source\">Source data</h2><p>The JSON this page was drawn from is embedded below "
       "(<code>script type=\"application/json\" id=\"dtplan-source\"</code>; read it with any JSON "
       "parser, <code>&lt;</code> is written as <code>\\u003c</code>).</p>\n"
       "<script type=\"application/json\" id=\"dtplan-source\">";
  o += json_for_script(json);
  o += "</script>\n</body></html>\n";
}

namespace {

void head(std::string& o, const std::string& title) { html_head(o, title); }
void tail(std::string& o, const std::string& json) { html_tail(o, json); }

void figure(std::string& o, const char* id, const std::string& svg, const std::string& caption) {
  fmt::format_to(std::back_inserter(o),
                 "<figure id=\"{}\">{}<figcaption>{}</figcaption></figure>\n", id, svg, e(caption));
}

std::string plan_cells(const Plan& p) {
  return fmt::format(
      "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
      "<td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td>",
      p.tp, p.pp, p.cp, p.ep, p.dp, p.vpp, p.sp ? "on" : "-", p.zero, e(p.recompute_cell()), p.mbs,
      p.pp > 1 ? e(p.schedule) : "-");
}

// "TP4 PP8 DP8 VPP3 Z1 sel mbs1": a bar label that fits.
std::string short_layout(const Plan& p) {
  std::string s = fmt::format("TP{} PP{} DP{}", p.tp, p.pp, p.dp);
  if (p.cp > 1) s += fmt::format(" CP{}", p.cp);
  if (p.ep > 1) s += fmt::format(" EP{}", p.ep);
  if (p.vpp > 1) s += fmt::format(" VPP{}", p.vpp);
  s += fmt::format(" Z{} {} mbs{}", p.zero, to_string(p.recompute), p.mbs);
  return s;
}

constexpr const char* kPlanHeader =
    "<th>TP</th><th>PP</th><th>CP</th><th>EP</th><th>DP</th><th>VPP</th><th>SP</th>"
    "<th>ZeRO</th><th class=\"l\">recompute</th><th>MBS</th><th class=\"l\">schedule</th>";

StackedBars step_chart(const std::string& title, const std::vector<std::string>& labels,
                       const std::vector<const Estimate*>& es) {
  StackedBars c;
  c.title = title;
  c.unit = "seconds per step";
  c.categories = labels;
  for (const auto& [name, v] : step_components(Estimate{})) c.series.push_back(name);
  for (const Estimate* est : es) {
    std::vector<double> row;
    for (const auto& [name, v] : step_components(*est)) row.push_back(v);
    c.values.push_back(row);
  }
  return c;
}

const std::vector<std::string>& memory_series() {
  static const std::vector<std::string> s = {"weights", "gradients", "optimizer state",
                                             "activations", "buffers"};
  return s;
}
// A section of derivations (quantity, formula or rule, values, result) with its heading.
void derivation_section(std::string& o, const char* id, const char* title, const char* intro,
                        const char* formula_header, const std::vector<Derivation>& rows) {
  auto out = std::back_inserter(o);
  fmt::format_to(out,
                 "<h2 id=\"{}\">{}</h2>\n<p>{}</p>\n<table><tr><th class=\"l\">quantity</th><th "
                 "class=\"l\">{}</th><th class=\"l\">values</th><th>result</th></tr>\n",
                 id, title, intro, formula_header);
  for (const auto& dv : rows)
    fmt::format_to(out,
                   "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>"
                   "<td>{}</td></tr>\n",
                   e(dv.quantity), e(dv.formula), e(dv.substituted), e(dv.result));
  o += "</table>\n";
}

std::vector<double> memory_row(const StageMemory& m) {
  const double g = units::kGiB;
  return {m.weights_bytes / g, m.grads_bytes / g, m.optimizer_bytes / g, m.activations_bytes / g,
          m.buffers_bytes / g};
}

}  // namespace

std::string render_report_html(const ReportData& d) {
  std::string o;
  o.reserve(size_t{256} * 1024);
  auto out = std::back_inserter(o);
  head(o, "dtplan report: " + d.title);
  fmt::format_to(out, "<h1>Capacity report: {}</h1>\n", e(d.title));
  fmt::format_to(out,
                 "<p class=\"sub\">{} ({:.1f} B parameters, {} layers, hidden {}) on {} x {} "
                 "({}, {} nodes of {} GPUs, {:.0f} GiB HBM each); batch {} x {} tokens, {}; "
                 "objective {}, framework {}.</p>\n",
                 e(d.model_display), d.params / 1e9, d.layers, d.hidden, d.gpus, e(d.gpu_name),
                 e(d.profile_name), d.nodes, d.gpus_per_node, d.hbm_gib, d.global_batch, d.seq_len,
                 e(d.precision), e(d.objective), e(d.framework));
  fmt::format_to(
      out, "<p class=\"sub\">Searched {} plans ({} evaluated, {} feasible) in {:.2f} s.</p>\n",
      d.stats.enumerated, d.stats.evaluated, d.stats.feasible, d.stats.elapsed_s);
  if (!d.number_warnings.empty()) {
    o += "<ul class=\"warnings\" id=\"number-warnings\">\n";
    for (const auto& w : d.number_warnings)
      fmt::format_to(out, "<li><code>{}</code>: {}</li>\n", e(w.code), e(w.message));
    o += "</ul>\n";
  }

  o += "<h2 id=\"summary\">Recommended plan</h2>\n";
  if (d.top.empty()) {
    o += "<p><b>No plan fits.</b> See the rejections below.</p>\n";
  } else {
    const PlanRow& b = d.top.front();
    const Estimate& est = b.estimate;
    fmt::format_to(out, "<p><b>{}</b> ({} micro-batches)</p>\n", e(b.layout), est.microbatches);
    fmt::format_to(out, "<p id=\"framework\">Framework rules applied: {}{}</p>\n", e(d.framework),
                   d.framework_warnings.empty() ? "; no warnings." : ". Warnings:");
    if (!d.framework_warnings.empty()) {
      o += "<ul class=\"warnings\">\n";
      for (const auto& w : d.framework_warnings)
        fmt::format_to(out, "<li><code>{}</code>: {}</li>\n", e(w.code), e(w.message));
      o += "</ul>\n";
    }
    o += "<div class=\"cards\">";
    auto card = [&](const std::string& name, const std::string& value) {
      fmt::format_to(out, "<div class=\"card\">{}<b>{}</b></div>", e(name), e(value));
    };
    card("step time", with_band(fmt::format("{:.3f} s", est.step_time_s), b.step_low_s,
                                b.step_high_s, "{:.1f}", b.band));
    card("tokens/s per GPU", fmt::format("{:.0f}", est.tokens_per_s_per_gpu));
    card("MFU", b.band ? fmt::format("{} ({:.0f}–{:.0f}%)", pct_text(est.mfu), 100 * b.mfu_low,
                                     100 * b.mfu_high)
                       : pct_text(est.mfu));
    card("model TFLOP/s per GPU", fmt::format("{:.1f}", est.model_tflops_per_gpu));
    card("peak memory",
         fmt::format("{} GiB of {:.0f}", gib_text(est.memory_peak.total_bytes()), d.hbm_gib));
    card("bubble", pct_text(est.bubble_fraction));
    card("exposed comm", pct_text(est.comm_share));
    if (d.train_tokens > 0)
      card(fmt::format("time to train {:.3g}T tokens", d.train_tokens / 1e12),
           with_band(fmt::format("{:.1f} days", est.time_to_train_days), b.days_low, b.days_high,
                     "{:.0f}", b.band));
    o += "</div>\n";
    if (!d.band_note.empty())
      fmt::format_to(out,
                     "<p class=\"sub\" id=\"band-note\">In brackets: {} (docs/accuracy.md, "
                     "Error bands).</p>\n",
                     e(d.band_note));
  }

  o += "<h2 id=\"top\">Ranked plans</h2>\n<table><tr><th>rank</th>";
  o += kPlanHeader;
  o += "<th>step (s)</th><th>MFU</th><th>tok/s/GPU</th><th>peak GiB</th><th>comm</th>"
       "<th>bubble</th></tr>\n";
  for (size_t i = 0; i < d.top.size(); ++i) {
    const Estimate& est = d.top[i].estimate;
    fmt::format_to(out,
                   "<tr><td>{}</td>{}<td>{}</td><td>{}</td><td>{:.0f}</td><td>{}</td>"
                   "<td>{}</td><td>{}</td></tr>\n",
                   i + 1, plan_cells(d.top[i].plan),
                   with_band(f3(est.step_time_s), d.top[i].step_low_s, d.top[i].step_high_s,
                             "{:.1f}", d.top[i].band),
                   pct_text(est.mfu), est.tokens_per_s_per_gpu,
                   gib_text(est.memory_peak.total_bytes()), pct_text(est.comm_share),
                   pct_text(est.bubble_fraction));
  }
  o += "</table>\n";

  o += "<h2 id=\"rejections\">Rejected plans</h2>\n<table><tr><th>count</th><th class=\"l\">"
       "reason</th><th class=\"l\">example</th></tr>\n";
  for (const auto& r : d.rejections)
    fmt::format_to(out, "<tr><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>\n",
                   r.count, e(r.reason), e(r.example));
  o += "</table>\n";

  o += "<h2 id=\"memory\">Memory per GPU</h2>\n";
  if (!d.top.empty()) {
    const PlanRow& b = d.top.front();
    StackedBars c;
    c.title = "Recommended plan: memory per GPU by pipeline stage";
    c.unit = "GiB";
    c.series = memory_series();
    for (size_t i = 0; i < b.stages.size(); ++i) {
      c.categories.push_back(fmt::format("stage {} ({} layers)", i, b.stages[i].layers));
      c.values.push_back(memory_row(b.stages[i]));
    }
    c.reference = d.hbm_gib;
    c.reference_label = fmt::format("HBM {:.0f} GiB", d.hbm_gib);
    figure(o, "chart-memory-stages", stacked_bars_svg(c),
           fmt::format("Dashed line: HBM capacity; the search keeps {:.1f} GiB usable.",
                       d.memory_budget_gib));
    StackedBars t;
    t.title = "Ranked plans: memory of the most loaded stage";
    t.unit = "GiB";
    t.series = memory_series();
    for (size_t i = 0; i < d.top.size(); ++i) {
      t.categories.push_back(fmt::format("#{} {}", i + 1, short_layout(d.top[i].plan)));
      t.values.push_back(memory_row(d.top[i].estimate.memory_peak));
    }
    t.reference = d.hbm_gib;
    t.reference_label = c.reference_label;
    figure(o, "chart-memory-top", stacked_bars_svg(t), "Peak stage of each ranked plan.");
  }

  o += "<h2 id=\"step\">Step time</h2>\n";
  if (!d.top.empty()) {
    std::vector<std::string> labels;
    std::vector<const Estimate*> es;
    for (size_t i = 0; i < d.top.size(); ++i) {
      labels.push_back(fmt::format("#{} {}", i + 1, short_layout(d.top[i].plan)));
      es.push_back(&d.top[i].estimate);
    }
    figure(o, "chart-step-breakdown",
           stacked_bars_svg(step_chart("Step-time breakdown of the ranked plans", labels, es)),
           "Busiest pipeline rank: compute, recomputation, exposed communication per dimension, "
           "pipeline bubble, optimizer step, framework overhead.");
  }

  o += "<h2 id=\"pareto\">Step time vs peak memory</h2>\n";
  {
    Scatter s;
    s.title = "Step time vs peak memory (ranked plans and the Pareto front)";
    s.x_label = "peak memory per GPU (GiB)";
    s.y_label = "step time (s)";
    // The axis stops at 3x the best step time: the front's slowest, smallest plans (thousands
    // of seconds a step) would squeeze the interesting range into a corner; the caption says
    // what was left out.
    const double limit_s = d.top.empty() ? 0 : 3 * d.top.front().estimate.step_time_s;
    int clipped = 0;
    auto add = [&](const PlanRow& p, int group) {
      if (limit_s > 0 && p.estimate.step_time_s > limit_s) {
        ++clipped;
        return;
      }
      s.points.push_back({p.estimate.memory_peak.total_bytes() / units::kGiB,
                          p.estimate.step_time_s, p.layout, group, p.band ? p.step_low_s : 0,
                          p.band ? p.step_high_s : 0});
    };
    for (size_t i = 0; i < d.top.size(); ++i) add(d.top[i], i == 0 ? 2 : 0);
    for (const auto& p : d.pareto) add(p, 1);
    s.x_reference = d.memory_budget_gib;
    s.x_reference_label = fmt::format("budget {:.1f} GiB", d.memory_budget_gib);
    figure(o, "chart-pareto", scatter_svg(s),
           "No plan on the front is both faster and smaller than another; the bars are each "
           "plan's p10-p90 step time." +
               (clipped > 0 ? fmt::format(" {} plan{} slower than {:.2f} s (3x the best) not "
                                          "drawn (dtplan search lists the whole front).",
                                          clipped, clipped == 1 ? "" : "s", limit_s)
                            : std::string()));
  }

  o += "<h2 id=\"heatmap\">Best step time by TP and PP</h2>\n";
  {
    Heatmap h;
    h.title = "Best step time (s) by TP x PP";
    h.row_label = "PP";
    h.column_label = "TP";
    h.unit = "step time (s)";
    for (int pp : d.heat_pp) h.rows.push_back(fmt::format("PP{}", pp));
    for (int tp : d.heat_tp) h.columns.push_back(fmt::format("TP{}", tp));
    for (const auto& cell : d.heat) {
      h.values.push_back(cell.step_time_s);
      h.has_value.push_back(cell.feasible);
      h.tooltips.push_back(cell.feasible
                               ? fmt::format("{:.3f} s: {}", cell.step_time_s, cell.layout)
                               : "no feasible plan");
    }
    figure(
        o, "chart-heatmap", heatmap_svg(h),
        "Each cell: the search re-run with TP and PP pinned; empty cells have no feasible plan.");
  }

  o += "<h2 id=\"timeline\">Pipeline timeline (discrete-event simulator)</h2>\n";
  {
    Gantt g;
    g.title = "Recommended plan: one step's pipeline, simulated";
    g.unit = "seconds from the step's start";
    g.kinds = {"forward", "backward"};
    const Timeline& t = d.timeline;
    for (int s = 0; s < t.stages; ++s) g.lanes.push_back(fmt::format("stage {}", s));
    for (const auto& task : t.tasks)
      g.tasks.push_back({task.stage, task.kind == 'F' ? 0 : 1, task.start_s, task.end_s});
    g.end = t.makespan_s;
    if (!t.available) g.lanes.push_back("(not simulated)");
    figure(o, "chart-timeline", gantt_svg(g), t.note);
    // The warm-up up close: until a while after stage 0 starts its first backward, where the
    // schedule's bubble shows.
    double first_b = t.makespan_s;
    for (const auto& task : t.tasks)
      if (task.stage == 0 && task.kind != 'F') first_b = std::min(first_b, task.end_s);
    const double zoom = std::min(t.makespan_s, 1.6 * first_b);
    if (t.available && zoom < 0.8 * t.makespan_s) {
      Gantt z = g;
      z.title = "The same pipeline up close: the warm-up";
      z.tasks.clear();
      for (const auto& task : g.tasks)
        if (task.start < zoom)
          z.tasks.push_back({task.lane, task.kind, task.start, std::min(task.end, zoom)});
      z.end = zoom;
      figure(o, "chart-timeline-warmup", gantt_svg(z),
             fmt::format("The first {:.3f} s of the step: forwards fill the pipeline stage by "
                         "stage; the idle gaps are the bubble.",
                         zoom));
    }
  }

  derivation_section(o, "derivations", "How the numbers come about",
                     "Each headline number of the recommended plan with its formula and the "
                     "values that went in, computed from the estimator's cost-model functions.",
                     "formula", d.derivations);
  if (!d.precision_notes.empty())
    derivation_section(o, "precision", "Precision",
                       "What the training precision changes on the peak stage: which GEMMs run "
                       "in FP8 and which stay in 16 bits, the memory FP8 adds, FP16's loss "
                       "scaling.",
                       "rule", d.precision_notes);
  if (!d.failures.empty())
    derivation_section(o, "failures", "Checkpoints and failures",
                       "What a checkpoint of the recommended plan holds and costs, how often to "
                       "write it, what a restart takes and what share of the time failures leave "
                       "(docs/resilience.md; defaults and sources there).",
                       "formula", d.failures);

  o += "<h2 id=\"alternatives\">Alternatives</h2>\n<p>For each dimension, the best plan that "
       "differs from the recommended one in it (the search re-run with that dimension "
       "pinned).</p>\n<table><tr><th class=\"l\">dimension</th><th class=\"l\">best plan</th>"
       "<th>step (s)</th><th>delta</th><th>peak GiB</th><th class=\"l\">why</th></tr>\n";
  for (const auto& a : d.alternatives) {
    if (a.found)
      fmt::format_to(out,
                     "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td>"
                     "<td class=\"{}\">{:+.3f} s</td><td>{}</td><td class=\"l\">{}</td></tr>\n",
                     e(a.dimension), e(a.row.layout), f3(a.row.estimate.step_time_s),
                     a.delta_step_s > 0 ? "worse" : "better", a.delta_step_s,
                     gib_text(a.row.estimate.memory_peak.total_bytes()), e(a.reason));
    else
      fmt::format_to(out,
                     "<tr><td class=\"l\">{}</td><td class=\"l\">-</td><td>-</td><td>-</td>"
                     "<td>-</td><td class=\"l\">{}</td></tr>\n",
                     e(a.dimension), e(a.reason));
  }
  o += "</table>\n";
  if (!d.top.empty() && !d.alternatives.empty()) {
    std::vector<std::string> labels = {"recommended " + short_layout(d.top.front().plan)};
    std::vector<const Estimate*> es = {&d.top.front().estimate};
    for (const auto& a : d.alternatives)
      if (a.found) {
        labels.push_back(a.dimension + ": " + short_layout(a.row.plan));
        es.push_back(&a.row.estimate);
      }
    figure(o, "chart-alternatives",
           stacked_bars_svg(step_chart("Recommended plan vs the alternatives", labels, es)),
           "Step-time breakdown of each alternative's best plan.");
  }

  o += "<h2 id=\"assumptions\">Assumptions</h2>\n<ul>";
  for (const auto& a : d.assumptions) fmt::format_to(out, "<li>{}</li>", e(a));
  o += "</ul>\n<h2 id=\"provenance\">Hardware constants and their sources</h2>\n<table><tr><th "
       "class=\"l\">field</th><th class=\"l\">value</th><th class=\"l\">source</th></tr>\n";
  for (const auto& p : d.provenance)
    fmt::format_to(out,
                   "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>"
                   "</tr>\n",
                   e(p.field), e(p.value), e(p.source));
  o += "</table>\n";
  fmt::format_to(out, "<p class=\"sub\">Generated by dtplan in {:.2f} s.</p>\n", d.generation_s);
  tail(o, d.source_json);
  return o;
}

std::string render_whatif_html(const WhatifData& d) {
  std::string o;
  o.reserve(size_t{128} * 1024);
  auto out = std::back_inserter(o);
  head(o, "dtplan what-if: " + d.title);
  fmt::format_to(
      out,
      "<h1>What-if study: {}</h1>\n<p class=\"sub\">From {}: {} scenarios, the "
      "best plan of each (a full search per scenario). Deltas are against the "
      "base (first column); green is better, red worse (memory: red only where it does not "
      "fit).</p>\n",
      e(d.title), e(d.file), d.columns.size());
  const ScenarioColumn* base = d.columns.empty() ? nullptr : &d.columns.front();
  o += "<h2 id=\"table\">Side by side</h2>\n<table><tr><th class=\"l\"></th>";
  for (const auto& c : d.columns) fmt::format_to(out, "<th class=\"l\">{}</th>", e(c.name));
  o += "</tr>\n";
  auto text_row = [&](const char* name, auto get) {
    fmt::format_to(out, "<tr><th class=\"l\">{}</th>", name);
    for (const auto& c : d.columns) fmt::format_to(out, "<td class=\"l\">{}</td>", e(get(c)));
    o += "</tr>\n";
  };
  // A number with its delta against the base; `lower_is_better` picks the colour.
  auto num_row = [&](const char* name, const char* fmtspec, bool lower_is_better, auto get) {
    fmt::format_to(out, "<tr><th class=\"l\">{}</th>", name);
    for (const auto& c : d.columns) {
      if (!c.found) {
        o += "<td>-</td>";
        continue;
      }
      const double v = get(c);
      if (std::isnan(v)) {
        o += "<td>-</td>";
        continue;
      }
      std::string cls, delta;
      if (base && base->found && &c != base) {
        const double b = get(*base);
        if (!std::isnan(b) && b != 0 && std::fabs(v - b) > 1e-12 * std::fabs(b)) {
          const double rel = (v - b) / std::fabs(b);
          delta = fmt::format(" ({:+.1f}%)", 100 * rel);
          if (std::fabs(rel) >= 0.005) cls = (rel < 0) == lower_is_better ? "better" : "worse";
        }
      }
      fmt::format_to(out, "<td{}>{}{}</td>", cls.empty() ? "" : " class=\"" + cls + "\"",
                     fmt::format(fmt::runtime(fmtspec), v), delta);
    }
    o += "</tr>\n";
  };
  text_row("settings", [](const ScenarioColumn& c) { return c.description; });
  text_row("model", [](const ScenarioColumn& c) { return c.model_display; });
  text_row("GPUs", [](const ScenarioColumn& c) {
    return fmt::format("{} x {} ({})", c.gpus, c.gpu_name, c.profile_name);
  });
  text_row("batch", [](const ScenarioColumn& c) {
    return fmt::format("{} x {} tokens, {}", c.global_batch, c.seq_len, c.precision);
  });
  text_row("best plan", [](const ScenarioColumn& c) {
    return c.found ? c.best.layout : "no feasible plan: " + c.top_rejection;
  });
  num_row("step time (s)", "{:.3f}", true,
          [](const ScenarioColumn& c) { return c.best.estimate.step_time_s; });
  text_row("step time p10-p90 (s)", [](const ScenarioColumn& c) {
    return c.found && c.band ? fmt::format("{:.2f}–{:.2f}", c.step_low_s, c.step_high_s)
                             : std::string("-");
  });
  text_row("warnings", [](const ScenarioColumn& c) {
    return c.warning_codes.empty() ? std::string("-")
                                   : fmt::format("{}", fmt::join(c.warning_codes, ", "));
  });
  num_row("tokens/s per GPU", "{:.0f}", false,
          [](const ScenarioColumn& c) { return c.best.estimate.tokens_per_s_per_gpu; });
  num_row("tokens/s (job)", "{:.0f}", false,
          [](const ScenarioColumn& c) { return c.best.estimate.tokens_per_s; });
  // MFU is of each column's precision peak; with FP8 among the columns the BF16 reading is the
  // one that compares.
  const bool fp8 = std::any_of(d.columns.begin(), d.columns.end(),
                               [](const ScenarioColumn& c) { return c.precision == "fp8"; });
  num_row(fp8 ? "MFU (of its precision's peak)" : "MFU", "{:.3f}", false,
          [](const ScenarioColumn& c) { return c.best.estimate.mfu; });
  if (fp8)
    num_row("MFU of the BF16 peak", "{:.3f}", false,
            [](const ScenarioColumn& c) { return c.mfu_bf16; });
  // Memory: a delta, coloured only where the plan does not fit (more memory that fits is not
  // worse).
  o += "<tr><th class=\"l\">peak memory (GiB)</th>";
  for (const auto& c : d.columns) {
    if (!c.found) {
      o += "<td>-</td>";
      continue;
    }
    const double v = c.best.estimate.memory_peak.total_bytes() / units::kGiB;
    std::string delta;
    if (base && base->found && &c != base) {
      const double b = base->best.estimate.memory_peak.total_bytes() / units::kGiB;
      if (b > 0 && std::fabs(v - b) > 1e-12 * b)
        delta = fmt::format(" ({:+.1f}%)", 100 * (v - b) / b);
    }
    fmt::format_to(out, "<td{}>{:.1f}{}</td>", c.best.estimate.fits ? "" : " class=\"worse\"", v,
                   delta);
  }
  o += "</tr>\n";
  const auto names = step_components(Estimate{});
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string label = names[k].first + " (s)";
    num_row(label.c_str(), "{:.3f}", true,
            [k](const ScenarioColumn& c) { return step_components(c.best.estimate)[k].second; });
  }
  for (int dim = 0; dim < kCommDims; ++dim) {
    const std::string label = fmt::format("{} traffic per GPU (GB)", kCommDimNames[dim]);
    num_row(label.c_str(), "{:.2f}", true, [dim](const ScenarioColumn& c) {
      return c.best.estimate.comm_volume_bytes[dim] / 1e9;
    });
  }
  num_row("bubble fraction", "{:.3f}", true,
          [](const ScenarioColumn& c) { return c.best.estimate.bubble_fraction; });
  bool reliability = false;
  for (const auto& c : d.columns) reliability |= c.has_reliability;
  if (reliability) {
    auto rel = [](double ScenarioColumn::*field, double scale) {
      return [field, scale](const ScenarioColumn& c) {
        return c.has_reliability ? c.*field * scale : std::nan("");
      };
    };
    num_row("job MTBF (h)", "{:.2f}", false, rel(&ScenarioColumn::job_mtbf_s, 1 / 3600.0));
    num_row("checkpoint write (s)", "{:.1f}", true, rel(&ScenarioColumn::checkpoint_s, 1));
    num_row("checkpoint interval, Young (min)", "{:.1f}", false,
            rel(&ScenarioColumn::checkpoint_interval_s, 1 / 60.0));
    num_row("time lost to checkpoints and failures (%)", "{:.2f}", true,
            rel(&ScenarioColumn::lost_fraction, 100));
    num_row("goodput tokens/s (job)", "{:.0f}", false,
            rel(&ScenarioColumn::goodput_tokens_per_s, 1));
  }
  bool trains = false;
  for (const auto& c : d.columns) trains |= c.train_tokens > 0;
  if (trains) {
    auto days = [](double ScenarioColumn::*field) {
      return [field](const ScenarioColumn& c) { return c.*field > 0 ? c.*field : std::nan(""); };
    };
    num_row("time to train (days)", "{:.1f}", true, days(&ScenarioColumn::time_to_train_days));
    text_row("time to train p10-p90 (days)", [](const ScenarioColumn& c) {
      return c.found && c.band && c.train_tokens > 0
                 ? fmt::format("{:.1f}–{:.1f}", c.days_low, c.days_high)
                 : std::string("-");
    });
    if (reliability)
      num_row("time to train with failures (days)", "{:.1f}", true,
              days(&ScenarioColumn::time_to_train_with_failures_days));
  }
  num_row("plans ranked in full (fit; not skipped on a floor)", "{:.0f}", false,
          [](const ScenarioColumn& c) { return static_cast<double>(c.feasible); });
  o += "</table>\n";

  o += "<h2 id=\"charts\">Charts</h2>\n";
  std::vector<std::string> labels;
  std::vector<const Estimate*> es;
  StackedBars mem;
  mem.title = "Peak-stage memory per GPU of each scenario's best plan";
  mem.unit = "GiB";
  mem.series = memory_series();
  for (const auto& c : d.columns) {
    labels.push_back(c.name);
    es.push_back(&c.best.estimate);
    mem.categories.push_back(c.name);
    mem.values.push_back(c.found ? memory_row(c.best.estimate.memory_peak)
                                 : std::vector<double>(5, 0.0));
  }
  figure(o, "chart-whatif-step",
         stacked_bars_svg(step_chart("Step-time breakdown by scenario", labels, es)),
         "Best plan of each scenario.");
  figure(o, "chart-whatif-memory", stacked_bars_svg(mem),
         "Memory of the most loaded pipeline stage.");
  {
    StackedBars tput;
    tput.title = "Tokens per second per GPU by scenario";
    tput.unit = "tokens/s per GPU";
    tput.series = {"tokens/s per GPU"};
    for (const auto& c : d.columns) {
      tput.categories.push_back(c.name);
      tput.values.push_back({c.found ? c.best.estimate.tokens_per_s_per_gpu : 0.0});
    }
    figure(o, "chart-whatif-throughput", stacked_bars_svg(tput), "Higher is better.");
  }
  fmt::format_to(out, "<p class=\"sub\">Generated by dtplan in {:.2f} s.</p>\n", d.generation_s);
  tail(o, d.source_json);
  return o;
}

}  // namespace dtplan::reports
