// The report's data (alternatives, heatmap, timeline) and its renderers: charts present as SVG,
// hostile text escaped in HTML, SVG and Markdown, the embedded JSON intact, Markdown tables
// well-formed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/catalog.h"
#include "core/error.h"
#include "reports/escape.h"
#include "reports/renderers.h"
#include "reports/report_builder.h"
#include "reports/svg_chart.h"

namespace dtplan::reports {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Llama 3 8B on 16 H100 (small enough for a unit test, with TP, PP and DP choices).
const ReportData& sample() {
  static const ReportData d = [] {
    const ModelSpec m = load_model("llama3-8b");
    const Cluster c = load_cluster("dgx-h100", 16);
    Workload w;
    w.seq_len = 4096;
    w.global_batch = 128;
    SearchSpace space;
    SearchOptions opt;
    opt.top_k = 5;
    const SearchResult r = search(m, c, w, space, opt, AnalyticEvaluator{});
    return build_report(m, c, w, space, opt, r, R"({"model": "llama3-8b"})");
  }();
  return d;
}

TEST(Report, AlternativesDifferInTheirDimensionAndAreNoFaster) {
  const ReportData& d = sample();
  ASSERT_FALSE(d.top.empty());
  const Plan& best = d.top.front().plan;
  ASSERT_GE(d.alternatives.size(), 5u);
  // Each row names its dimension once: the two TP alternatives (within the NVLink domain and
  // across nodes) are told apart (a report listed "tp" twice, found by a new-user trial).
  std::set<std::string> dims;
  for (const auto& a : d.alternatives) EXPECT_TRUE(dims.insert(a.dimension).second) << a.dimension;
  for (const auto& a : d.alternatives) {
    if (!a.found) continue;
    const Plan& p = a.row.plan;
    if (a.dimension.rfind("tp", 0) == 0) {
      EXPECT_NE(p.tp, best.tp) << a.what;
    }
    if (a.dimension == "pp") {
      EXPECT_NE(p.pp, best.pp) << a.what;
    }
    if (a.dimension == "zero") {
      EXPECT_TRUE(p.zero != best.zero || p.pp != best.pp) << a.what;
    }
    if (a.dimension == "mbs") {
      EXPECT_NE(p.mbs, best.mbs) << a.what;
    }
    if (a.dimension == "recompute") {
      EXPECT_NE(p.recompute, best.recompute) << a.what;
    }
    if (a.dimension == "cp") {
      EXPECT_NE(p.cp, best.cp) << a.what;
    }
    if (a.dimension == "vpp") {
      EXPECT_NE(p.vpp, best.vpp) << a.what;
    }
    if (a.dimension == "schedule") {
      EXPECT_NE(p.schedule, best.schedule) << a.what;
    }
    // The recommended plan is the best of the whole space, so a pinned search cannot beat it.
    EXPECT_GE(a.row.estimate.step_time_s, d.top.front().estimate.step_time_s) << a.what;
    EXPECT_NEAR(a.delta_step_s, a.row.estimate.step_time_s - d.top.front().estimate.step_time_s,
                1e-12);
    EXPECT_NE(a.reason.find(a.what), std::string::npos);
  }
}

TEST(Report, HeatmapCellOfTheRecommendedLayoutHoldsItsStepTime) {
  const ReportData& d = sample();
  ASSERT_EQ(d.heat.size(), d.heat_tp.size() * d.heat_pp.size());
  const Plan& best = d.top.front().plan;
  double best_cell = 1e300;
  bool found = false;
  for (const auto& cell : d.heat) {
    if (!cell.feasible) continue;
    best_cell = std::min(best_cell, cell.step_time_s);
    if (cell.tp == best.tp && cell.pp == best.pp) {
      found = true;
      EXPECT_DOUBLE_EQ(cell.step_time_s, d.top.front().estimate.step_time_s);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_DOUBLE_EQ(best_cell, d.top.front().estimate.step_time_s);
}

TEST(Report, TimelineHasEveryTaskOfTheStep) {
  const ReportData& d = sample();
  const Plan& p = d.top.front().plan;
  ASSERT_TRUE(d.timeline.available) << d.timeline.note;
  // One forward and one backward per stage, chunk and micro-batch.
  EXPECT_EQ(d.timeline.tasks.size(), static_cast<size_t>(2 * p.pp * p.vpp * p.num_microbatches()));
  for (const auto& t : d.timeline.tasks) {
    EXPECT_LE(t.start_s, t.end_s);
    EXPECT_LE(t.end_s, d.timeline.makespan_s * (1 + 1e-9));
  }
}

TEST(Report, HtmlHasEveryChartAsSvgAndOnlyTheJsonScript) {
  const std::string html = render_report_html(sample());
  for (const char* id : {"chart-memory-stages", "chart-memory-top", "chart-step-breakdown",
                         "chart-pareto", "chart-heatmap", "chart-timeline", "chart-alternatives"}) {
    const size_t at = html.find(std::string("<figure id=\"") + id + "\"><svg ");
    EXPECT_NE(at, std::string::npos) << id;
  }
  EXPECT_EQ(count(html, "<script"), 1u);
  EXPECT_EQ(count(html, "<script type=\"application/json\" id=\"dtplan-source\">"), 1u);
}

TEST(Report, HostileTextIsEscapedEverywhere) {
  ReportData d = sample();
  const std::string evil = "<script>alert(1)</script><img src=x onerror=alert(2)>";
  d.title = d.model_display = d.gpu_name = evil;
  d.top.front().layout = evil;
  d.alternatives.front().reason = evil;
  d.alternatives.front().what = evil;
  d.provenance.front().source = "\"><svg onload=alert(3)>";
  d.rejections.push_back({evil, 1, evil});
  d.source_json = nlohmann::json{{"model", evil}}.dump();
  const std::string html = render_report_html(d);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<svg onload"), std::string::npos);
  EXPECT_EQ(count(html, "<script"), 1u);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  const std::string md = render_report_markdown(d);
  EXPECT_FALSE(std::regex_search(md, std::regex("<[A-Za-z/!?]"))) << "raw HTML in Markdown";
}

TEST(Report, EmbeddedJsonSurvivesEscaping) {
  const std::string json = R"({"name":"</script><script>alert(1)</script>","x":"a\u2028b"})";
  const std::string safe = json_for_script(json);
  EXPECT_EQ(safe.find('<'), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(safe), nlohmann::json::parse(json));
  EXPECT_EQ(html_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
  EXPECT_EQ(markdown_cell("a|b<i>\n"), "a\\|b&lt;i> ");  // '>' alone opens no tag
  // CommonMark: a backslash before ASCII punctuation makes it literal, so no link or image.
  EXPECT_EQ(markdown_cell("![x](http://e/a.png)[y](u)"), "\\!\\[x\\](http://e/a.png)\\[y\\](u)");
}

// Every pipe table: a delimiter row, and the header's cell count in every row.
TEST(Report, MarkdownTablesAreWellFormed) {
  std::istringstream in(render_report_markdown(sample()));
  std::string line;
  std::vector<std::string> block;
  int tables = 0;
  auto cells = [](const std::string& row) {
    int n = 0;
    for (size_t i = 0; i < row.size(); ++i)
      if (row[i] == '|' && (i == 0 || row[i - 1] != '\\')) ++n;
    return n - 1;
  };
  auto flush = [&] {
    if (block.empty()) return;
    ++tables;
    ASSERT_GE(block.size(), 2u);
    EXPECT_TRUE(std::regex_match(block[1], std::regex(R"(\|( :?-{3,}:? \|)+)"))) << block[1];
    for (const auto& r : block) EXPECT_EQ(cells(r), cells(block[0])) << r;
    block.clear();
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '|')
      block.push_back(line);
    else
      flush();
  }
  flush();
  EXPECT_GE(tables, 9);
}

TEST(Report, FormatComesFromTheExtension) {
  EXPECT_EQ(format_from_path("a/b.html", "--out"), Format::kHtml);
  EXPECT_EQ(format_from_path("B.MD", "--out"), Format::kMarkdown);
  EXPECT_THROW(format_from_path("r.pdf", "--out"), InputError);
}

TEST(Svg, GanttMergesTasksSoSizeStaysBounded) {
  Gantt g;
  g.lanes = {"stage 0"};
  g.kinds = {"forward"};
  for (int i = 0; i < 100000; ++i) g.tasks.push_back({0, 0, i * 1e-4, (i + 1) * 1e-4});
  g.end = 10;
  const std::string svg = gantt_svg(g);
  EXPECT_LT(count(svg, "<rect"), 10u);  // one run plus the legend swatch
}

}  // namespace
}  // namespace dtplan::reports
