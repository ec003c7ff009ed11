// The Markdown format of reports and what-if studies (renderers.h): GitHub-flavoured, no raw
// HTML; each chart's data is a table.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>

#include "reports/escape.h"
#include "reports/renderers.h"
#include "reports/report_builder.h"
#include "reports/uncertainty.h"

namespace dtplan::reports {

namespace {

std::string c(std::string_view s) { return markdown_cell(s); }

// A pipe table: header cells, then rows with the same number of cells (already escaped).
void table(std::string& o, const std::vector<std::string>& header,
           const std::vector<std::vector<std::string>>& rows) {
  o += "|";
  for (const auto& h : header) o += " " + h + " |";
  // Right-align a column whose cells are all numbers (possibly bold or signed), else left.
  auto numeric = [](const std::string& cell) {
    size_t i = cell.rfind("**", 0) == 0 ? 2 : 0;
    if (i < cell.size() && (cell[i] == '+' || cell[i] == '-')) ++i;
    return i < cell.size() && std::isdigit(static_cast<unsigned char>(cell[i]));
  };
  o += "\n|";
  for (size_t i = 0; i < header.size(); ++i) {
    bool right = i > 0 && !rows.empty();
    for (const auto& r : rows) right = right && i < r.size() && (numeric(r[i]) || r[i] == "-");
    o += right ? " ---: |" : " --- |";
  }
  o += "\n";
  for (const auto& r : rows) {
    o += "|";
    for (size_t i = 0; i < header.size(); ++i) o += " " + (i < r.size() ? r[i] : "") + " |";
    o += "\n";
  }
  o += "\n";
}

void source_block(std::string& o, const std::string& json) {
  o += "## Source data\n\nThe JSON this report was drawn from (`<` written as `\\u003c`):\n\n";
  o += "```json\n" + json_for_script(json);
  if (!json.empty() && json.back() != '\n') o += "\n";
  o += "```\n";
}

std::vector<std::string> plan_cell_list(const Plan& p) {
  return {std::to_string(p.tp),  std::to_string(p.pp),          std::to_string(p.cp),
          std::to_string(p.ep),  std::to_string(p.dp),          std::to_string(p.vpp),
          p.sp ? "on" : "-",     std::to_string(p.zero),        p.recompute_cell(),
          std::to_string(p.mbs), p.pp > 1 ? c(p.schedule) : "-"};
}

}  // namespace

std::string render_report_markdown(const ReportData& d) {
  std::string o;
  auto out = std::back_inserter(o);
  fmt::format_to(out, "# Capacity report: {}\n\n", c(d.title));
  fmt::format_to(out,
                 "{} ({:.1f} B parameters, {} layers, hidden {}) on {} x {} ({}, {} nodes of {} "
                 "GPUs, {:.0f} GiB HBM each); batch {} x {} tokens, {}; objective {}, framework "
                 "{}. Searched {} plans ({} evaluated, {} feasible) in {:.2f} s.\n\n",
                 c(d.model_display), d.params / 1e9, d.layers, d.hidden, d.gpus, c(d.gpu_name),
                 c(d.profile_name), d.nodes, d.gpus_per_node, d.hbm_gib, d.global_batch, d.seq_len,
                 c(d.precision), c(d.objective), c(d.framework), d.stats.enumerated,
                 d.stats.evaluated, d.stats.feasible, d.stats.elapsed_s);
  for (const auto& w : d.number_warnings)
    fmt::format_to(out, "> **warning** `{}`: {}\n>\n", c(w.code), c(w.message));
  if (!d.number_warnings.empty()) o += "\n";
  o += "## Recommended plan\n\n";
  if (d.top.empty()) {
    o += "**No plan fits.** See the rejections below.\n\n";
  } else {
    const Estimate& e = d.top.front().estimate;
    fmt::format_to(out, "**{}** ({} micro-batches)\n\n", c(d.top.front().layout), e.microbatches);
    fmt::format_to(out, "Framework rules applied: {}{}\n\n", c(d.framework),
                   d.framework_warnings.empty() ? "; no warnings." : ". Warnings:");
    for (const auto& w : d.framework_warnings)
      fmt::format_to(out, "- `{}`: {}\n", c(w.code), c(w.message));
    if (!d.framework_warnings.empty()) o += "\n";
    std::vector<std::vector<std::string>> figures = {
        {"step time", with_band(fmt::format("{:.3f} s", e.step_time_s), d.top.front().step_low_s,
                                d.top.front().step_high_s, "{:.1f}", d.top.front().band)},
        {"tokens/s per GPU", fmt::format("{:.0f}", e.tokens_per_s_per_gpu)},
        {"MFU", d.top.front().band
                    ? fmt::format("{} ({:.0f}–{:.0f}%)", pct_text(e.mfu),
                                  100 * d.top.front().mfu_low, 100 * d.top.front().mfu_high)
                    : pct_text(e.mfu)},
        {"model TFLOP/s per GPU", fmt::format("{:.1f}", e.model_tflops_per_gpu)},
        {"peak memory",
         fmt::format("{} GiB of {:.0f}", gib_text(e.memory_peak.total_bytes()), d.hbm_gib)},
        {"bubble", pct_text(e.bubble_fraction)},
        {"exposed communication", pct_text(e.comm_share)}};
    if (d.train_tokens > 0)
      figures.push_back(
          {fmt::format("time to train {:.3g}T tokens", d.train_tokens / 1e12),
           with_band(fmt::format("{:.1f} days", e.time_to_train_days), d.top.front().days_low,
                     d.top.front().days_high, "{:.0f}", d.top.front().band)});
    table(o, {"figure", "value"}, figures);
    if (!d.band_note.empty())
      fmt::format_to(out, "In brackets: {} (docs/accuracy.md, Error bands).\n\n", c(d.band_note));
  }

  o += "## Ranked plans\n\n";
  {
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < d.top.size(); ++i) {
      const Estimate& e = d.top[i].estimate;
      std::vector<std::string> r = {std::to_string(i + 1)};
      for (auto& s : plan_cell_list(d.top[i].plan)) r.push_back(s);
      for (const auto& s :
           {fmt::format("{:.3f}", e.step_time_s), pct_text(e.mfu),
            fmt::format("{:.0f}", e.tokens_per_s_per_gpu), gib_text(e.memory_peak.total_bytes()),
            pct_text(e.comm_share), pct_text(e.bubble_fraction)})
        r.push_back(s);
      rows.push_back(r);
    }
    table(o,
          {"rank", "TP", "PP", "CP", "EP", "DP", "VPP", "SP", "ZeRO", "recompute", "MBS",
           "schedule", "step (s)", "MFU", "tok/s/GPU", "peak GiB", "comm", "bubble"},
          rows);
  }

  o += "## Rejected plans\n\n";
  {
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : d.rejections)
      rows.push_back({c(r.reason), std::to_string(r.count), c(r.example)});
    table(o, {"reason", "count", "example"}, rows);
  }

  o += "## Memory per GPU (GiB)\n\n";
  if (!d.top.empty()) {
    fmt::format_to(out,
                   "Recommended plan, by pipeline stage; HBM {:.0f} GiB, usable {:.1f} "
                   "GiB.\n\n",
                   d.hbm_gib, d.memory_budget_gib);
    std::vector<std::vector<std::string>> rows;
    const auto& stages = d.top.front().stages;
    for (size_t i = 0; i < stages.size(); ++i) {
      const StageMemory& m = stages[i];
      rows.push_back({fmt::format("stage {} ({} layers)", i, m.layers), gib_text(m.weights_bytes),
                      gib_text(m.grads_bytes), gib_text(m.optimizer_bytes),
                      gib_text(m.activations_bytes), gib_text(m.buffers_bytes),
                      gib_text(m.total_bytes()),
                      m.total_bytes() <= d.hbm_gib * units::kGiB ? "yes" : "**no**"});
    }
    table(o,
          {"stage", "weights", "gradients", "optimizer", "activations", "buffers", "total",
           "fits HBM"},
          rows);
  }

  o += "## Step-time breakdown (s)\n\n";
  {
    std::vector<std::string> header = {"plan"};
    for (const auto& [name, v] : step_components(Estimate{})) header.push_back(name);
    header.push_back("step");
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < d.top.size(); ++i) {
      std::vector<std::string> r = {fmt::format("#{} {}", i + 1, c(d.top[i].layout))};
      for (const auto& [name, v] : step_components(d.top[i].estimate))
        r.push_back(fmt::format("{:.3f}", v));
      r.push_back(fmt::format("{:.3f}", d.top[i].estimate.step_time_s));
      rows.push_back(r);
    }
    table(o, header, rows);
  }

  o += "## Pareto front (step time vs peak memory)\n\n";
  {
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : d.pareto)
      rows.push_back({c(p.layout), fmt::format("{:.3f}", p.estimate.step_time_s),
                      gib_text(p.estimate.memory_peak.total_bytes())});
    table(o, {"plan", "step (s)", "peak GiB"}, rows);
  }

  o += "## Best step time (s) by TP and PP\n\n";
  if (!d.heat_tp.empty()) {
    std::vector<std::string> header = {"PP \\ TP"};
    for (int tp : d.heat_tp) header.push_back(fmt::format("TP{}", tp));
    std::vector<std::vector<std::string>> rows;
    for (size_t i = 0; i < d.heat_pp.size(); ++i) {
      std::vector<std::string> r = {fmt::format("PP{}", d.heat_pp[i])};
      for (size_t j = 0; j < d.heat_tp.size(); ++j) {
        const HeatCell& cell = d.heat[i * d.heat_tp.size() + j];
        r.push_back(cell.feasible ? fmt::format("{:.3f}", cell.step_time_s) : "-");
      }
      rows.push_back(r);
    }
    table(o, header, rows);
  }

  o += "## Pipeline timeline (discrete-event simulator)\n\n";
  {
    const Timeline& t = d.timeline;
    o += c(t.note) + "\n\n";
    if (t.available) {
      std::vector<double> busy(static_cast<size_t>(t.stages), 0.0);
      std::vector<double> first(static_cast<size_t>(t.stages), 1e300), last(busy);
      for (const auto& task : t.tasks) {
        const size_t s = static_cast<size_t>(task.stage);
        if (s >= busy.size()) continue;
        busy[s] += task.end_s - task.start_s;
        first[s] = std::min(first[s], task.start_s);
        last[s] = std::max(last[s], task.end_s);
      }
      std::vector<std::vector<std::string>> rows;
      for (size_t s = 0; s < busy.size(); ++s)
        rows.push_back({fmt::format("stage {}", s), fmt::format("{:.3f}", first[s]),
                        fmt::format("{:.3f}", last[s]), fmt::format("{:.3f}", busy[s]),
                        fmt::format("{:.3f}", t.makespan_s - busy[s])});
      table(o, {"stage", "first task starts (s)", "last task ends (s)", "busy (s)", "idle (s)"},
            rows);
    }
  }

  // Derivation sections: quantity, formula (or rule), values, result.
  auto derivations = [&](const std::string& heading, const char* formula_header,
                         const std::vector<Derivation>& list) {
    o += heading;
    std::vector<std::vector<std::string>> rows;
    rows.reserve(list.size());
    for (const auto& dv : list)
      rows.push_back({c(dv.quantity), c(dv.formula), c(dv.substituted), c(dv.result)});
    table(o, {"quantity", formula_header, "values", "result"}, rows);
  };
  derivations("## How the numbers come about\n\n", "formula", d.derivations);
  if (!d.precision_notes.empty())
    derivations("## Precision\n\nWhat the training precision changes on the peak stage.\n\n",
                "rule", d.precision_notes);
  if (!d.failures.empty())
    derivations(
        "## Checkpoints and failures\n\nWhat a checkpoint of the recommended plan holds and "
        "costs, how often to write it, what a restart takes and what share of the time failures "
        "leave (docs/resilience.md).\n\n",
        "formula", d.failures);

  o += "## Alternatives\n\nFor each dimension, the best plan that differs from the recommended "
       "one in it (the search re-run with that dimension pinned).\n\n";
  {
    std::vector<std::vector<std::string>> rows;
    for (const auto& a : d.alternatives)
      rows.push_back({c(a.dimension), a.found ? c(a.row.layout) : "-",
                      a.found ? fmt::format("{:.3f}", a.row.estimate.step_time_s) : "-",
                      a.found ? fmt::format("{:+.3f} s", a.delta_step_s) : "-", c(a.reason)});
    table(o, {"dimension", "best plan", "step (s)", "delta", "why"}, rows);
  }

  o += "## Assumptions\n\n";
  for (const auto& a : d.assumptions) o += "- " + c(a) + "\n";
  o += "\n## Hardware constants and their sources\n\n";
  {
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : d.provenance) rows.push_back({c(p.field), c(p.value), c(p.source)});
    table(o, {"field", "value", "source"}, rows);
  }
  fmt::format_to(out, "Generated by dtplan in {:.2f} s.\n\n", d.generation_s);
  source_block(o, d.source_json);
  return o;
}

std::string render_whatif_markdown(const WhatifData& d) {
  std::string o;
  auto out = std::back_inserter(o);
  fmt::format_to(out,
                 "# What-if study: {}\n\nFrom {}: {} scenarios, the best plan of each (a full "
                 "search per scenario). Deltas are against the base (first column); **bold** "
                 "marks a change of 0.5% or more.\n\n",
                 c(d.title), c(d.file), d.columns.size());
  std::vector<std::string> header = {"figure"};
  for (const auto& col : d.columns) header.push_back(c(col.name));
  std::vector<std::vector<std::string>> rows;
  const ScenarioColumn* base = d.columns.empty() ? nullptr : &d.columns.front();
  auto text_row = [&](const char* name, auto get) {
    std::vector<std::string> r = {name};
    for (const auto& col : d.columns) r.push_back(c(get(col)));
    rows.push_back(r);
  };
  auto num_row = [&](const std::string& name, const char* spec, auto get) {
    std::vector<std::string> r = {name};
    for (const auto& col : d.columns) {
      if (!col.found) {
        r.push_back("-");
        continue;
      }
      const double v = get(col);
      if (std::isnan(v)) {
        r.push_back("-");
        continue;
      }
      std::string cell = fmt::format(fmt::runtime(spec), v);
      if (base && base->found && &col != base) {
        const double b = get(*base);
        if (!std::isnan(b) && b != 0 && std::fabs(v - b) > 1e-12 * std::fabs(b)) {
          const double rel = (v - b) / std::fabs(b);
          cell += fmt::format(" ({:+.1f}%)", 100 * rel);
          if (std::fabs(rel) >= 0.005) cell.insert(0, "**").append("**");
        }
      }
      r.push_back(cell);
    }
    rows.push_back(r);
  };
  text_row("settings", [](const ScenarioColumn& col) { return col.description; });
  text_row("model", [](const ScenarioColumn& col) { return col.model_display; });
  text_row("GPUs", [](const ScenarioColumn& col) {
    return fmt::format("{} x {} ({})", col.gpus, col.gpu_name, col.profile_name);
  });
  text_row("batch", [](const ScenarioColumn& col) {
    return fmt::format("{} x {} tokens, {}", col.global_batch, col.seq_len, col.precision);
  });
  text_row("best plan", [](const ScenarioColumn& col) {
    return col.found ? col.best.layout : "no feasible plan: " + col.top_rejection;
  });
  num_row("step time (s)", "{:.3f}",
          [](const ScenarioColumn& col) { return col.best.estimate.step_time_s; });
  text_row("step time p10-p90 (s)", [](const ScenarioColumn& col) {
    return col.found && col.band ? fmt::format("{:.2f}–{:.2f}", col.step_low_s, col.step_high_s)
                                 : std::string("-");
  });
  text_row("warnings", [](const ScenarioColumn& col) {
    return col.warning_codes.empty() ? std::string("-")
                                     : fmt::format("{}", fmt::join(col.warning_codes, ", "));
  });
  num_row("tokens/s per GPU", "{:.0f}",
          [](const ScenarioColumn& col) { return col.best.estimate.tokens_per_s_per_gpu; });
  num_row("tokens/s (job)", "{:.0f}",
          [](const ScenarioColumn& col) { return col.best.estimate.tokens_per_s; });
  // MFU is of each column's precision peak; with FP8 among the columns the BF16 reading is the
  // one that compares.
  const bool fp8 = std::any_of(d.columns.begin(), d.columns.end(),
                               [](const ScenarioColumn& col) { return col.precision == "fp8"; });
  num_row(fp8 ? "MFU (of its precision's peak)" : "MFU", "{:.3f}",
          [](const ScenarioColumn& col) { return col.best.estimate.mfu; });
  if (fp8)
    num_row("MFU of the BF16 peak", "{:.3f}",
            [](const ScenarioColumn& col) { return col.mfu_bf16; });
  num_row("peak memory (GiB)", "{:.1f}", [](const ScenarioColumn& col) {
    return col.best.estimate.memory_peak.total_bytes() / units::kGiB;
  });
  num_row("optimizer state (GiB)", "{:.1f}", [](const ScenarioColumn& col) {
    return col.best.estimate.memory_peak.optimizer_bytes / units::kGiB;
  });
  const auto names = step_components(Estimate{});
  for (size_t k = 0; k < names.size(); ++k)
    num_row(names[k].first + " (s)", "{:.3f}", [k](const ScenarioColumn& col) {
      return step_components(col.best.estimate)[k].second;
    });
  for (int dim = 0; dim < kCommDims; ++dim)
    num_row(fmt::format("{} traffic per GPU (GB)", kCommDimNames[dim]), "{:.2f}",
            [dim](const ScenarioColumn& col) {
              return col.best.estimate.comm_volume_bytes[dim] / 1e9;
            });
  num_row("bubble fraction", "{:.3f}",
          [](const ScenarioColumn& col) { return col.best.estimate.bubble_fraction; });
  bool reliability = false;
  for (const auto& col : d.columns) reliability |= col.has_reliability;
  if (reliability) {
    auto rel = [](double ScenarioColumn::*field, double scale) {
      return [field, scale](const ScenarioColumn& col) {
        return col.has_reliability ? col.*field * scale : std::nan("");
      };
    };
    num_row("job MTBF (h)", "{:.2f}", rel(&ScenarioColumn::job_mtbf_s, 1 / 3600.0));
    num_row("checkpoint write (s)", "{:.1f}", rel(&ScenarioColumn::checkpoint_s, 1));
    num_row("checkpoint interval, Young (min)", "{:.1f}",
            rel(&ScenarioColumn::checkpoint_interval_s, 1 / 60.0));
    num_row("time lost to checkpoints and failures (%)", "{:.2f}",
            rel(&ScenarioColumn::lost_fraction, 100));
    num_row("goodput tokens/s (job)", "{:.0f}", rel(&ScenarioColumn::goodput_tokens_per_s, 1));
  }
  bool trains = false;
  for (const auto& col : d.columns) trains |= col.train_tokens > 0;
  if (trains) {
    auto days = [](double ScenarioColumn::*field) {
      return
          [field](const ScenarioColumn& col) { return col.*field > 0 ? col.*field : std::nan(""); };
    };
    num_row("time to train (days)", "{:.1f}", days(&ScenarioColumn::time_to_train_days));
    text_row("time to train p10-p90 (days)", [](const ScenarioColumn& col) {
      return col.found && col.band && col.train_tokens > 0
                 ? fmt::format("{:.1f}–{:.1f}", col.days_low, col.days_high)
                 : std::string("-");
    });
    if (reliability)
      num_row("time to train with failures (days)", "{:.1f}",
              days(&ScenarioColumn::time_to_train_with_failures_days));
  }
  num_row("plans ranked in full (fit; not skipped on a floor)", "{:.0f}",
          [](const ScenarioColumn& col) { return static_cast<double>(col.feasible); });
  o += "## Side by side\n\n";
  table(o, header, rows);
  fmt::format_to(out, "Generated by dtplan in {:.2f} s.\n\n", d.generation_s);
  source_block(o, d.source_json);
  return o;
}

}  // namespace dtplan::reports
