// The RL report (rl_report.h) in HTML and Markdown, and its JSON (dtplan rl --json).
#include "reports/rl_report.h"

#include <fmt/format.h>

#include <iterator>
#include <nlohmann/json.hpp>

#include "reports/escape.h"
#include "reports/html_page.h"
#include "reports/svg_chart.h"

namespace dtplan::reports {

namespace {

using rl::RlResult;

double phase(const RlResult& r, const char* name) {
  for (const auto& [n, s] : r.phases_s)
    if (n == name) return s;
  return 0;
}

nlohmann::json result_json(const RlResult& r) {
  nlohmann::json j;
  j["architecture"] = rl::to_string(r.architecture);
  j["step_time_s"] = r.step_time_s;
  nlohmann::json ph = nlohmann::json::object(), gs = nlohmann::json::object();
  for (const auto& [n, s] : r.phases_s) ph[n] = s;
  for (const auto& [n, s] : r.gpu_seconds) gs[n] = s;
  j["phases_s"] = ph;
  j["gpu_seconds"] = gs;
  j["idle_share"] = {{"rollout", r.idle_share_rollout}, {"training", r.idle_share_training}};
  j["weight_sync"] = {{"bytes", r.sync_bytes},
                      {"time_s", r.sync_time_s},
                      {"exposed_s", r.sync_exposed_s},
                      {"interval_steps", r.sync_interval_steps},
                      {"how", r.sync_how}};
  j["staleness_steps"] = r.staleness_steps;
  j["generation_tokens_per_s"] = r.generation_tokens_per_s;
  j["training_tokens_per_s"] = r.training_tokens_per_s;
  j["gpus"] = {{"rollout", r.rollout_gpus}, {"training", r.training_gpus}};
  const GenerationResult& g = r.generation;
  j["rollout"] = {{"tp", r.rollout_tp},
                  {"pp", r.rollout_pp},
                  {"replicas", r.rollout_replicas},
                  {"batch_time_s", g.time_s},
                  {"prefill_s", g.prefill_s},
                  {"tail_s", g.tail_s},
                  {"response_tokens", g.tokens},
                  {"longest_response_tokens", g.longest_tokens},
                  {"peak_batch", g.peak_batch},
                  {"kv_capacity_tokens", g.kv_capacity_tokens},
                  {"kv_limited", g.kv_limited},
                  {"memory_bound", g.memory_bound},
                  {"streaming_tokens_per_s_per_replica", g.streaming_tokens_per_s_per_replica}};
  j["training"] = {{"plan", r.training_plan.describe()},
                   {"optimizer_steps", r.optimizer_steps},
                   {"optimizer_step_s", r.training_estimate.step_time_s},
                   {"mfu", r.training_estimate.mfu},
                   {"seq_tokens", r.training_seq_tokens},
                   {"peak_memory_bytes", r.training_estimate.memory_peak.total_bytes()}};
  nlohmann::json d = nlohmann::json::array();
  for (const auto& x : r.derivations)
    d.push_back({{"name", x.name}, {"formula", x.formula}, {"value", x.value}});
  j["derivations"] = d;
  j["notes"] = r.notes;
  nlohmann::json tl = nlohmann::json::array();
  for (const auto& s : r.timeline)
    tl.push_back(
        {{"phase", s.phase}, {"pool", s.pool}, {"start_s", s.start_s}, {"end_s", s.end_s}});
  j["timeline"] = tl;
  return j;
}

std::string s3(double v) { return fmt::format("{:.3g}", v); }
std::string sec(double v) { return fmt::format("{:.1f}", v); }
std::string pct(double v) { return fmt::format("{:.1f}%", 100 * v); }

std::string pools(const RlResult& r) {
  if (r.architecture == rl::Architecture::kColocated)
    return fmt::format("{} GPUs shared: rollout {} x {} replicas; training {}", r.rollout_gpus,
                       rl::rollout_layout(r), r.rollout_replicas, r.training_plan.describe());
  return fmt::format("rollout {} GPUs ({} x {} replicas), training {} GPUs ({})", r.rollout_gpus,
                     rl::rollout_layout(r), r.rollout_replicas, r.training_gpus,
                     r.training_plan.describe());
}

const char* kPhaseNames[] = {"generation", "reward",      "logprob", "critic",
                             "training",   "weight_sync", "offload"};

Gantt timeline(const RlResult& r) {
  Gantt g;
  g.title.assign("Two steps in steady state");
  g.unit.assign(1, 's');
  for (const char* k : kPhaseNames) g.kinds.push_back(k);
  for (const auto& s : r.timeline) {
    int lane = -1;
    for (size_t i = 0; i < g.lanes.size(); ++i)
      if (g.lanes[i] == s.pool) lane = static_cast<int>(i);
    if (lane < 0) {
      g.lanes.push_back(s.pool);
      lane = static_cast<int>(g.lanes.size()) - 1;
    }
    int kind = 0;
    for (size_t i = 0; i < g.kinds.size(); ++i)
      if (g.kinds[i] == s.phase) kind = static_cast<int>(i);
    g.tasks.push_back({lane, kind, s.start_s, s.end_s});
    g.end = std::max(g.end, s.end_s);
  }
  return g;
}

}  // namespace

std::string rl_json(const RlReportData& d) {
  nlohmann::json j = result_json(d.result.best);
  j["title"] = d.title;
  j["policy"] = d.policy;
  j["cluster"] = d.cluster;
  j["total_gpus"] = d.gpus;
  nlohmann::json per = nlohmann::json::array();
  for (const auto& r : d.result.best_per_architecture) per.push_back(result_json(r));
  j["architectures"] = per;
  nlohmann::json considered = nlohmann::json::array();
  for (const auto& a : d.result.considered) {
    nlohmann::json c = {{"architecture", rl::to_string(a.architecture)},
                        {"rollout_gpus", a.rollout_gpus},
                        {"rollout_tp", a.rollout_tp},
                        {"rollout_pp", a.rollout_pp},
                        {"feasible", a.feasible}};
    if (a.feasible)
      c["step_time_s"] = a.step_time_s;
    else
      c["why"] = a.why;
    considered.push_back(c);
  }
  j["considered"] = considered;
  nlohmann::json w = nlohmann::json::array();
  for (const auto& v : d.whatif) {
    nlohmann::json x = {{"name", v.name}, {"found", v.found}};
    if (v.found)
      x["result"] = result_json(v.best);
    else
      x["why"] = v.why;
    w.push_back(x);
  }
  j["whatif"] = w;
  j["search_s"] = d.result.elapsed_s;
  return j.dump(2);
}

namespace {

std::string markdown(const RlReportData& d) {
  const RlResult& r = d.result.best;
  std::string o;
  auto out = std::back_inserter(o);
  fmt::format_to(out, "# {}\n\n", markdown_cell(d.title));
  fmt::format_to(out, "Policy {} on {} x {} GPUs. Architecture **{}**{}, step {} s; {}.\n\n",
                 markdown_cell(d.policy), d.gpus, markdown_cell(d.cluster),
                 rl::to_string(r.architecture),
                 d.searched ? " (the fastest of the architectures and pool splits searched)" : "",
                 sec(r.step_time_s), markdown_cell(pools(r)));
  o += "## Phases of one step\n\n| phase | seconds | share of step | GPU-hours per step "
       "|\n|---|---|---|---|\n";
  for (size_t i = 0; i < r.phases_s.size(); ++i) {
    const auto& [n, s] = r.phases_s[i];
    if (s <= 0) continue;
    fmt::format_to(out, "| {} | {} | {} | {} |\n", n, sec(s), pct(s / r.step_time_s),
                   s3(r.gpu_seconds[i].second / 3600));
  }
  fmt::format_to(out,
                 "\nIn the asynchronous architectures phases overlap; the step is the longer side "
                 "plus what is exposed.\n\n- Idle share: rollout pool {}, training pool {}\n"
                 "- Weight sync: {:.1f} GiB, {} s every {} step(s), {} s exposed ({})\n"
                 "- Staleness: {} steps\n- Over the step (a step's tokens / the step time): "
                 "generation {:.0f} response tokens/s, training {:.0f} tokens/s\n\n",
                 pct(r.idle_share_rollout), pct(r.idle_share_training), r.sync_bytes / (1 << 30),
                 s3(r.sync_time_s), r.sync_interval_steps, s3(r.sync_exposed_s),
                 markdown_cell(r.sync_how), s3(r.staleness_steps), r.generation_tokens_per_s,
                 r.training_tokens_per_s);
  o += "## How the numbers were derived\n\n| quantity | formula | values |\n|---|---|---|\n";
  for (const auto& x : r.derivations)
    fmt::format_to(out, "| {} | {} | {} |\n", markdown_cell(x.name), markdown_cell(x.formula),
                   markdown_cell(x.value));
  for (const auto& n : r.notes) fmt::format_to(out, "\n- {}", markdown_cell(n));
  o += "\n\n## Timeline (two steps)\n\n| pool | phase | start (s) | end (s) |\n|---|---|---|---|\n";
  for (const auto& s : r.timeline)
    fmt::format_to(out, "| {} | {} | {} | {} |\n", s.pool, s.phase, sec(s.start_s), sec(s.end_s));
  if (d.result.best_per_architecture.size() > 1) {
    o +=
        "\n## Architectures compared (best allocation of each)\n\n| architecture | step (s) | "
        "generation (s) | training (s) | sync exposed (s) | rollout / training GPUs | staleness |\n"
        "|---|---|---|---|---|---|---|\n";
    for (const auto& a : d.result.best_per_architecture)
      fmt::format_to(out, "| {} | {} | {} | {} | {} | {} / {} | {} |\n",
                     rl::to_string(a.architecture), sec(a.step_time_s), sec(phase(a, "generation")),
                     sec(phase(a, "training")), s3(a.sync_exposed_s), a.rollout_gpus,
                     a.training_gpus, s3(a.staleness_steps));
  }
  if (!d.whatif.empty()) {
    o += "\n## What if\n\n| variation | architecture | step (s) | vs base | generation (s) | "
         "training (s) |\n|---|---|---|---|---|---|\n";
    for (const auto& v : d.whatif) {
      if (!v.found) {
        fmt::format_to(out, "| {} | no plan: {} | | | | |\n", markdown_cell(v.name),
                       markdown_cell(v.why));
        continue;
      }
      fmt::format_to(out, "| {} | {} | {} | {:+.1f}% | {} | {} |\n", markdown_cell(v.name),
                     rl::to_string(v.best.architecture), sec(v.best.step_time_s),
                     100 * (v.best.step_time_s / r.step_time_s - 1),
                     sec(phase(v.best, "generation")), sec(phase(v.best, "training")));
    }
  }
  o += "\n## Source data\n\n```json\n";
  std::string js = rl_json(d);
  for (char c : js) {
    if (c == '<')
      o += "\\u003c";
    else
      o += c;
  }
  o += "\n```\n";
  return o;
}

std::string html(const RlReportData& d) {
  const RlResult& r = d.result.best;
  std::string o;
  auto out = std::back_inserter(o);
  auto e = [](std::string_view s) { return html_escape(s); };
  html_head(o, "dtplan rl: " + d.title);
  fmt::format_to(out, "<h1>{}</h1><p class=\"sub\">Policy {} on {} x {}; from {}</p>\n", e(d.title),
                 e(d.policy), d.gpus, e(d.cluster), e(d.config_file));
  fmt::format_to(out,
                 "<div class=\"cards\"><div class=\"card\">step<b>{} s</b>{}</div>"
                 "<div class=\"card\">generation<b>{} s</b>{} of the step</div>"
                 "<div class=\"card\">weight sync<b>{} s</b>every {} step(s)</div>"
                 "<div class=\"card\">staleness<b>{}</b>steps</div>"
                 "<div class=\"card\">idle<b>{} / {}</b>rollout / training</div></div>\n",
                 sec(r.step_time_s), rl::to_string(r.architecture), sec(phase(r, "generation")),
                 pct(phase(r, "generation") / r.step_time_s), s3(r.sync_time_s),
                 r.sync_interval_steps, s3(r.staleness_steps), pct(r.idle_share_rollout),
                 pct(r.idle_share_training));
  fmt::format_to(out, "<p>{}</p>\n", e(pools(r)));
  o += "<h2>Phases of one step</h2><table><tr><th class=\"l\">phase</th><th>seconds</th>"
       "<th>share</th><th>GPU-hours</th></tr>\n";
  for (size_t i = 0; i < r.phases_s.size(); ++i) {
    const auto& [n, s] = r.phases_s[i];
    if (s <= 0) continue;
    fmt::format_to(out, "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", n,
                   sec(s), pct(s / r.step_time_s), s3(r.gpu_seconds[i].second / 3600));
  }
  o += "</table>\n";
  fmt::format_to(out, "<figure>{}<figcaption>Phases of two steps per pool</figcaption></figure>\n",
                 gantt_svg(timeline(r)));
  o += "<h2>How the numbers were derived</h2><table><tr><th class=\"l\">quantity</th><th "
       "class=\"l\">formula</th><th class=\"l\">values</th></tr>\n";
  for (const auto& x : r.derivations)
    fmt::format_to(
        out, "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>\n",
        e(x.name), e(x.formula), e(x.value));
  o += "</table>\n";
  for (const auto& n : r.notes) fmt::format_to(out, "<p>{}</p>\n", e(n));
  if (d.result.best_per_architecture.size() > 1) {
    o += "<h2>Architectures compared</h2><table><tr><th class=\"l\">architecture</th><th>step "
         "(s)</th><th>generation (s)</th><th>training (s)</th><th>sync exposed (s)</th><th>rollout "
         "/ "
         "training GPUs</th><th>staleness</th></tr>\n";
    for (const auto& a : d.result.best_per_architecture)
      fmt::format_to(
          out,
          "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / "
          "{}</td><td>{}</td></tr>\n",
          rl::to_string(a.architecture), sec(a.step_time_s), sec(phase(a, "generation")),
          sec(phase(a, "training")), s3(a.sync_exposed_s), a.rollout_gpus, a.training_gpus,
          s3(a.staleness_steps));
    o += "</table>\n";
  }
  if (!d.whatif.empty()) {
    o += "<h2>What if</h2><table><tr><th class=\"l\">variation</th><th "
         "class=\"l\">architecture</th><th>step (s)</th><th>vs base</th><th>generation "
         "(s)</th><th>training (s)</th></tr>\n";
    for (const auto& v : d.whatif) {
      if (!v.found) {
        fmt::format_to(
            out, "<tr><td class=\"l\">{}</td><td class=\"l\" colspan=\"5\">no plan: {}</td></tr>\n",
            e(v.name), e(v.why));
        continue;
      }
      fmt::format_to(
          out,
          "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{:+.1f}%</td>"
          "<td>{}</td><td>{}</td></tr>\n",
          e(v.name), rl::to_string(v.best.architecture), sec(v.best.step_time_s),
          100 * (v.best.step_time_s / r.step_time_s - 1), sec(phase(v.best, "generation")),
          sec(phase(v.best, "training")));
    }
    o += "</table>\n";
  }
  html_tail(o, rl_json(d));
  return o;
}

}  // namespace

std::string render_rl(const RlReportData& d, Format f) {
  return f == Format::kHtml ? html(d) : markdown(d);
}

}  // namespace dtplan::reports
