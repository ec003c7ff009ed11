// Inline SVG charts for the HTML reports: stacked bars, a scatter, a heatmap and a pipeline
// timeline. Each returns one self-contained <svg> element (no script, no external reference)
// that scales with the page (viewBox) and prints; every text from the caller is escaped.
#pragma once

#include <string>
#include <vector>

namespace dtplan::reports {

// Horizontal stacked bars: one bar per category, one segment per series.
struct StackedBars {
  std::string title;
  std::string unit;                         // axis unit, e.g. "GiB" or "s"
  std::vector<std::string> categories;      // bar labels
  std::vector<std::string> series;          // segment names (legend)
  std::vector<std::vector<double>> values;  // [category][series], >= 0
  double reference = 0;                     // a vertical line (e.g. HBM capacity); 0 = none
  std::string reference_label;
};
std::string stacked_bars_svg(const StackedBars& chart);

struct ScatterPoint {
  double x = 0, y = 0;
  std::string label;
  int group = 0;  // 0 other, 1 Pareto front, 2 recommended
  // An error bar on y (the p10-p90 of the point's step time); drawn when y_high > y_low.
  double y_low = 0, y_high = 0;
};
struct Scatter {
  std::string title, x_label, y_label;
  std::vector<ScatterPoint> points;
  double x_reference = 0;  // a vertical line (memory budget); 0 = none
  std::string x_reference_label;
};
std::string scatter_svg(const Scatter& chart);

// Rows x columns of values; cells with has_value = false are drawn empty ("no plan").
struct Heatmap {
  std::string title, row_label, column_label, unit;
  std::vector<std::string> rows, columns;
  std::vector<double> values;  // rows x columns, row-major
  std::vector<bool> has_value;
  std::vector<std::string> tooltips;  // optional, per cell
};
std::string heatmap_svg(const Heatmap& chart);

struct GanttTask {
  int lane = 0;
  int kind = 0;  // index into Gantt::kinds
  double start = 0, end = 0;
};
struct Gantt {
  std::string title, unit;
  std::vector<std::string> lanes;
  std::vector<std::string> kinds;  // legend names, one colour each
  std::vector<GanttTask> tasks;
  double end = 0;
};
// Drawn in columns (a pixel, or coarser for many lanes: about 6,000 columns in all): each shows
// the kind that kept its lane busy, or "mixed" when kinds alternate within it, and runs of one
// kind are one rect, so the size is bounded however many tasks there are.
std::string gantt_svg(const Gantt& chart);

// Lines on log-log axes (e.g. a collective's time against message size per algorithm), with
// dashed vertical markers (crossovers).
struct LineSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), both > 0
};
struct LineChart {
  std::string title, x_label, y_label;
  std::vector<LineSeries> series;
  std::vector<std::pair<double, std::string>> markers;  // x and its label
};
std::string line_chart_svg(const LineChart& chart);

// The colour the charts give to series `i` (also used by the HTML legend tables).
const char* chart_colour(int i);

}  // namespace dtplan::reports
