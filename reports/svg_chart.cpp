#include "reports/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "reports/escape.h"

namespace dtplan::reports {

namespace {

// Okabe-Ito-like palette, distinguishable in colour-blind vision and in grey print.
constexpr const char* kPalette[] = {"#0072b2", "#e69f00", "#009e73", "#cc79a7",
                                    "#56b4e9", "#d55e00", "#f0e442", "#999999",
                                    "#332288", "#88ccee", "#117733", "#aa4499"};
constexpr int kPaletteSize = static_cast<int>(sizeof(kPalette) / sizeof(kPalette[0]));

// A "nice" axis maximum and tick step covering `max_value`.
void nice_axis(double max_value, double& axis_max, double& step) {
  if (!(max_value > 0)) max_value = 1;
  const double raw = max_value / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double nice = norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10;
  step = nice * mag;
  axis_max = std::ceil(max_value / step - 1e-9) * step;
  if (axis_max <= 0) axis_max = step;
}

std::string num(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  if (a >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3g}", v);
}

void open_svg(std::string& o, double width, double height, const std::string& title) {
  fmt::format_to(std::back_inserter(o),
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 {:.0f} "
                 "{:.0f}\" width=\"100%\" style=\"max-width:{:.0f}px\" role=\"img\" "
                 "aria-label=\"{}\">"
                 "<title>{}</title>"
                 "<style>text{{font:12px sans-serif;fill:#222}}.ax{{stroke:#888;stroke-width:1}}"
                 ".grid{{stroke:#ddd;stroke-width:1}}.ref{{stroke:#c00;stroke-width:2;"
                 "stroke-dasharray:6 3}}.t{{font-weight:bold;font-size:14px}}</style>",
                 width, height, width, html_escape(title), html_escape(title));
  fmt::format_to(std::back_inserter(o), "<text class=\"t\" x=\"8\" y=\"18\">{}</text>",
                 html_escape(title));
}

void legend(std::string& o, const std::vector<std::string>& names, double x, double y,
            double width) {
  double cx = x, cy = y;
  for (size_t i = 0; i < names.size(); ++i) {
    const double w = 24 + 7.0 * static_cast<double>(names[i].size());
    if (cx + w > x + width) {
      cx = x;
      cy += 18;
    }
    fmt::format_to(std::back_inserter(o),
                   "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                   "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>",
                   cx, cy - 10, chart_colour(static_cast<int>(i)), cx + 16, cy,
                   html_escape(names[i]));
    cx += w;
  }
}

double legend_height(const std::vector<std::string>& names, double width) {
  double cx = 0, rows = 1;
  for (const auto& n : names) {
    const double w = 24 + 7.0 * static_cast<double>(n.size());
    if (cx + w > width) {
      cx = 0;
      ++rows;
    }
    cx += w;
  }
  return rows * 18;
}

}  // namespace

const char* chart_colour(int i) {
  return kPalette[((i % kPaletteSize) + kPaletteSize) % kPaletteSize];
}

std::string stacked_bars_svg(const StackedBars& c) {
  const double width = 960, label_w = 290, right = 40, bar_h = 20, gap = 8;
  const double plot_w = width - label_w - right;
  const double lh = legend_height(c.series, width - 16);
  const double top = 30 + lh + 8;
  const double n = static_cast<double>(c.categories.size());
  const double height = top + n * (bar_h + gap) + 40;
  double max_total = c.reference;
  for (const auto& row : c.values) {
    double t = 0;
    for (double v : row) t += std::max(0.0, v);
    max_total = std::max(max_total, t);
  }
  double axis_max = 1, step = 1;
  nice_axis(max_total, axis_max, step);
  auto x_of = [&](double v) { return label_w + plot_w * v / axis_max; };
  std::string o;
  o.reserve(4096 + c.categories.size() * c.series.size() * 120);
  open_svg(o, width, height, c.title);
  legend(o, c.series, 8, 30 + 14, width - 16);
  const double plot_bottom = top + n * (bar_h + gap);
  auto out = std::back_inserter(o);
  for (double t = 0; t <= axis_max + step / 2; t += step) {
    fmt::format_to(out,
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text x=\"{0:.1f}\" y=\"{3:.1f}\" "
                   "text-anchor=\"middle\">{4}</text>",
                   x_of(t), top - 4, plot_bottom, plot_bottom + 14, num(t));
  }
  fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                 label_w + plot_w / 2, plot_bottom + 30, html_escape(c.unit));
  for (size_t i = 0; i < c.categories.size(); ++i) {
    const double y = top + static_cast<double>(i) * (bar_h + gap);
    std::string label = c.categories[i];
    if (label.size() > 40) {
      size_t cut = 39;  // not inside a UTF-8 sequence
      while (cut > 0 && (static_cast<unsigned char>(label[cut]) & 0xC0) == 0x80) --cut;
      label = label.substr(0, cut) + "\u2026";
    }
    fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                   label_w - 6, y + bar_h * 0.7, html_escape(label));
    double acc = 0;
    const auto& row = i < c.values.size() ? c.values[i] : std::vector<double>{};
    for (size_t s = 0; s < row.size(); ++s) {
      const double v = std::max(0.0, row[s]);
      if (v <= 0) continue;
      const double x0 = x_of(acc), x1 = x_of(acc + v);
      fmt::format_to(out,
                     "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" "
                     "fill=\"{}\"><title>{}: {} {}</title></rect>",
                     x0, y, std::max(0.0, x1 - x0), bar_h, chart_colour(static_cast<int>(s)),
                     html_escape(s < c.series.size() ? c.series[s] : ""), num(v),
                     html_escape(c.unit));
      acc += v;
    }
    fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", x_of(acc) + 4, y + bar_h * 0.7,
                   num(acc));
  }
  fmt::format_to(out,
                 "<line class=\"ax\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>",
                 label_w, top - 4, plot_bottom);
  if (c.reference > 0) {
    fmt::format_to(out,
                   "<line class=\"ref\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\" "
                   "fill=\"#c00\">{5}</text>",
                   x_of(c.reference), top - 6, plot_bottom, x_of(c.reference) - 4, top - 8 + 0,
                   html_escape(c.reference_label));
  }
  o += "</svg>";
  return o;
}

std::string scatter_svg(const Scatter& c) {
  const double width = 900, height = 420, left = 70, right = 30, top = 50, bottom = 50;
  const double pw = width - left - right, ph = height - top - bottom;
  double max_x = c.x_reference, max_y = 0, min_y = 1e300;
  for (const auto& p : c.points) {
    max_x = std::max(max_x, p.x);
    max_y = std::max({max_y, p.y, p.y_high});
    min_y = std::min(min_y, p.y_high > p.y_low && p.y_low > 0 ? std::min(p.y, p.y_low) : p.y);
  }
  double ax = 1, sx = 1, ay = 1, sy = 1;
  nice_axis(max_x, ax, sx);
  nice_axis(max_y, ay, sy);
  // Step times of a front span orders of magnitude: a log axis when they span more than 10x.
  const bool log_y = min_y > 0 && max_y / min_y > 10;
  double lo_dec = 0, hi_dec = 1;
  if (log_y) {
    lo_dec = std::floor(std::log10(min_y));
    hi_dec = std::ceil(std::log10(max_y));
    if (hi_dec <= lo_dec) hi_dec = lo_dec + 1;
  }
  auto X = [&](double v) { return left + pw * v / ax; };
  auto Y = [&](double v) {
    if (log_y) return top + ph - ph * (std::log10(v) - lo_dec) / (hi_dec - lo_dec);
    return top + ph - ph * v / ay;
  };
  std::string o;
  open_svg(o, width, height, c.title);
  auto out = std::back_inserter(o);
  legend(o, {"other ranked plans", "Pareto front", "recommended"}, left, 38, pw);
  for (double t = 0; t <= ax + sx / 2; t += sx)
    fmt::format_to(out,
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text x=\"{0:.1f}\" y=\"{3:.1f}\" "
                   "text-anchor=\"middle\">{4}</text>",
                   X(t), top, top + ph, top + ph + 14, num(t));
  std::vector<double> yticks;
  if (log_y) {
    for (double dec = lo_dec; dec <= hi_dec + 0.5; ++dec)
      for (double mul : {1.0, 2.0, 5.0})
        if (dec + std::log10(mul) <= hi_dec + 1e-9) yticks.push_back(mul * std::pow(10.0, dec));
  } else {
    for (double t = 0; t <= ay + sy / 2; t += sy) yticks.push_back(t);
  }
  for (double t : yticks)
    fmt::format_to(out,
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" "
                   "y2=\"{1:.1f}\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" "
                   "text-anchor=\"end\">{5}</text>",
                   left, Y(t), left + pw, left - 4, Y(t) + 4, num(t));
  fmt::format_to(out,
                 "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>"
                 "<text transform=\"translate(14 {:.1f}) rotate(-90)\" "
                 "text-anchor=\"middle\">{}</text>",
                 left + pw / 2, height - 12, html_escape(c.x_label), top + ph / 2,
                 html_escape(log_y ? c.y_label + ", log scale" : c.y_label));
  if (c.x_reference > 0)
    fmt::format_to(out,
                   "<line class=\"ref\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\" "
                   "fill=\"#c00\">{5}</text>",
                   X(c.x_reference), top, top + ph, X(c.x_reference) - 4, top + 12,
                   html_escape(c.x_reference_label));
  // Error bars under the points.
  for (const auto& p : c.points)
    if (p.y_high > p.y_low && p.y_low > 0)
      fmt::format_to(out,
                     "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
                     "stroke=\"#555\" stroke-width=\"1.5\"><title>{3}: p10-p90 {4}-{5} s</title>"
                     "</line>",
                     X(p.x), Y(p.y_low), Y(p.y_high), html_escape(p.label), num(p.y_low),
                     num(p.y_high));
  // Draw others first, the front and the recommended plan on top.
  for (int g = 0; g <= 2; ++g)
    for (const auto& p : c.points) {
      if (p.group != g) continue;
      fmt::format_to(out,
                     "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" "
                     "stroke=\"#222\" stroke-width=\"{}\"><title>{}: {} s, {} GiB</title>"
                     "</circle>",
                     X(p.x), Y(p.y), g == 2 ? 7 : 5, chart_colour(g), g == 2 ? 2 : 0.5,
                     html_escape(p.label), num(p.y), num(p.x));
    }
  o += "</svg>";
  return o;
}

std::string heatmap_svg(const Heatmap& c) {
  const double cell_w = 90, cell_h = 34, left = 90, top = 56;
  const double cols = static_cast<double>(c.columns.size()),
               rows = static_cast<double>(c.rows.size());
  const double width = std::max(420.0, left + cols * cell_w + 20);
  const double height = top + rows * cell_h + 40;
  double lo = 1e300, hi = -1e300;
  for (size_t i = 0; i < c.values.size(); ++i)
    if (i < c.has_value.size() && c.has_value[i]) {
      lo = std::min(lo, c.values[i]);
      hi = std::max(hi, c.values[i]);
    }
  std::string o;
  open_svg(o, width, height, c.title);
  auto out = std::back_inserter(o);
  fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                 left + cols * cell_w / 2, top - 24, html_escape(c.column_label));
  fmt::format_to(out, "<text x=\"8\" y=\"{:.1f}\">{}</text>", top - 6, html_escape(c.row_label));
  for (size_t j = 0; j < c.columns.size(); ++j)
    fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                   left + (static_cast<double>(j) + 0.5) * cell_w, top - 6,
                   html_escape(c.columns[j]));
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const double y = top + static_cast<double>(i) * cell_h;
    fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 8,
                   y + cell_h * 0.6, html_escape(c.rows[i]));
    for (size_t j = 0; j < c.columns.size(); ++j) {
      const size_t k = i * c.columns.size() + j;
      const double x = left + static_cast<double>(j) * cell_w;
      const bool has = k < c.has_value.size() && c.has_value[k];
      std::string fill = "#f2f2f2";
      std::string text = "no plan";
      if (has) {
        // Best (lowest) is dark green, worst pale yellow.
        const double t = hi > lo ? (c.values[k] - lo) / (hi - lo) : 0;
        const int r = static_cast<int>(0 + t * 250), g = static_cast<int>(110 + t * 130),
                  b = static_cast<int>(60 + t * 120);
        fill = fmt::format("rgb({},{},{})", r, g, b);
        text = num(c.values[k]);
      }
      const std::string tip = k < c.tooltips.size() ? c.tooltips[k] : text;
      fmt::format_to(
          out,
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" "
          "fill=\"{}\" stroke=\"#fff\"><title>{}</title></rect>"
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\"{}>{}</text>",
          x, y, cell_w, cell_h, fill, html_escape(tip), x + cell_w / 2, y + cell_h * 0.6,
          has && hi > lo && (c.values[k] - lo) / (hi - lo) < 0.5 ? " style=\"fill:#fff\"" : "",
          html_escape(text));
    }
  }
  fmt::format_to(out, "<text x=\"8\" y=\"{:.1f}\">{}</text>", height - 12,
                 html_escape("cell: best " + c.unit + " with that pair pinned (darker is faster)"));
  o += "</svg>";
  return o;
}

std::string gantt_svg(const Gantt& c) {
  const double width = 1000, left = 80, right = 20, lane_h = 18, gap = 4;
  const double pw = width - left - right;
  // Kinds, plus one for columns where several kinds alternate faster than a pixel.
  std::vector<std::string> names = c.kinds;
  if (names.size() > 1) names.push_back("mixed (alternating faster than drawn)");
  const double lh = legend_height(names, pw);
  const double top = 30 + lh + 10;
  const double n = static_cast<double>(c.lanes.size());
  const double height = top + n * (lane_h + gap) + 40;
  const double end = c.end > 0 ? c.end : 1;
  double ax = 1, step = 1;
  nice_axis(end, ax, step);
  auto X = [&](double v) { return left + pw * v / ax; };
  std::string o;
  o.reserve(4096 + c.tasks.size() * 64);
  open_svg(o, width, height, c.title);
  legend(o, names, left, 44, pw);
  auto out = std::back_inserter(o);
  const double bottom = top + n * (lane_h + gap);
  for (double t = 0; t <= ax + step / 2; t += step)
    fmt::format_to(out,
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text x=\"{0:.1f}\" y=\"{3:.1f}\" "
                   "text-anchor=\"middle\">{4}</text>",
                   X(t), top - 2, bottom, bottom + 14, num(t));
  fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                 left + pw / 2, bottom + 30, html_escape(c.unit));
  for (size_t i = 0; i < c.lanes.size(); ++i)
    fmt::format_to(out, "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6,
                   top + static_cast<double>(i) * (lane_h + gap) + lane_h * 0.75,
                   html_escape(c.lanes[i]));
  // Columns of a pixel or more: each shows the kind that kept the lane busy for three quarters of
  // what it was busy, "mixed" when kinds alternate within it, idle when busy less than half of it;
  // runs of one kind become one rect. The size is bounded by lanes x columns whatever the tasks. At
  // most about 6,000 columns over all lanes (a deep pipeline gets coarser columns).
  const int cols = std::clamp(static_cast<int>(6000 / std::max<size_t>(1, c.lanes.size())), 60,
                              static_cast<int>(pw));
  const size_t kinds = std::max<size_t>(1, c.kinds.size());
  const double col_s = ax / cols;
  std::vector<std::string> by_kind(names.size() > kinds ? kinds + 1 : kinds);
  std::vector<double> busy(static_cast<size_t>(cols) * kinds);
  for (size_t lane = 0; lane < c.lanes.size(); ++lane) {
    std::fill(busy.begin(), busy.end(), 0.0);
    for (const auto& t : c.tasks) {
      if (t.lane != static_cast<int>(lane) || !(t.end > t.start)) continue;
      const size_t k = static_cast<size_t>(std::max(0, t.kind)) % kinds;
      const int first = std::clamp(static_cast<int>(t.start / col_s), 0, cols - 1);
      const int last = std::clamp(static_cast<int>(t.end / col_s), 0, cols - 1);
      for (int j = first; j <= last; ++j) {
        const double lo = std::max(t.start, j * col_s), hi = std::min(t.end, (j + 1) * col_s);
        if (hi > lo) busy[static_cast<size_t>(j) * kinds + k] += hi - lo;
      }
    }
    auto kind_at = [&](int j) {
      int best = -1;
      double total = 0, most = 0;
      for (size_t k = 0; k < kinds; ++k) {
        const double b = busy[static_cast<size_t>(j) * kinds + k];
        total += b;
        if (b > most) {
          most = b;
          best = static_cast<int>(k);
        }
      }
      if (total < 0.5 * col_s) return -1;
      return most >= 0.75 * total || by_kind.size() == kinds ? best : static_cast<int>(kinds);
    };
    int j = 0;
    while (j < cols) {
      const int k = kind_at(j);
      int run_end = j + 1;
      while (run_end < cols && kind_at(run_end) == k) ++run_end;
      if (k >= 0)
        fmt::format_to(std::back_inserter(by_kind[static_cast<size_t>(k)]),
                       "<rect x=\"{:.1f}\" y=\"{:.0f}\" width=\"{:.1f}\" height=\"{:.0f}\"/>",
                       X(j * col_s), top + static_cast<double>(lane) * (lane_h + gap),
                       X(run_end * col_s) - X(j * col_s), lane_h);
      j = run_end;
    }
  }
  for (size_t k = 0; k < by_kind.size(); ++k)
    fmt::format_to(out, "<g fill=\"{}\">{}</g>", chart_colour(static_cast<int>(k)), by_kind[k]);
  o += "</svg>";
  return o;
}

std::string line_chart_svg(const LineChart& c) {
  const double width = 900, height = 440, left = 80, right = 30, top = 60, bottom = 50;
  const double pw = width - left - right, ph = height - top - bottom;
  double min_x = 1e300, max_x = 0, min_y = 1e300, max_y = 0;
  for (const auto& s : c.series)
    for (const auto& [x, y] : s.points) {
      if (!(x > 0 && y > 0)) continue;
      min_x = std::min(min_x, x), max_x = std::max(max_x, x);
      min_y = std::min(min_y, y), max_y = std::max(max_y, y);
    }
  if (!(max_x > 0)) min_x = 1, max_x = 10, min_y = 1, max_y = 10;
  const double x0 = std::floor(std::log10(min_x)),
               x1 = std::max(x0 + 1, std::ceil(std::log10(max_x)));
  const double y0 = std::floor(std::log10(min_y)),
               y1 = std::max(y0 + 1, std::ceil(std::log10(max_y)));
  auto X = [&](double v) { return left + pw * (std::log10(v) - x0) / (x1 - x0); };
  auto Y = [&](double v) { return top + ph - ph * (std::log10(v) - y0) / (y1 - y0); };
  std::string o;
  open_svg(o, width, height, c.title);
  auto out = std::back_inserter(o);
  std::vector<std::string> names;
  for (const auto& s : c.series) names.push_back(s.name);
  legend(o, names, left, 38, pw);
  for (double d = x0; d <= x1 + 1e-9; ++d)
    fmt::format_to(out,
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text x=\"{0:.1f}\" y=\"{3:.1f}\" "
                   "text-anchor=\"middle\">1e{4:.0f}</text>",
                   X(std::pow(10.0, d)), top, top + ph, top + ph + 14, d);
  for (double d = y0; d <= y1 + 1e-9; ++d)
    fmt::format_to(out,
                   "<line class=\"grid\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" "
                   "y2=\"{1:.1f}\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" "
                   "text-anchor=\"end\">1e{5:.0f}</text>",
                   left, Y(std::pow(10.0, d)), left + pw, left - 4, Y(std::pow(10.0, d)) + 4, d);
  fmt::format_to(out,
                 "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}, log scale</text>"
                 "<text transform=\"translate(14 {:.1f}) rotate(-90)\" "
                 "text-anchor=\"middle\">{}, log scale</text>",
                 left + pw / 2, height - 12, html_escape(c.x_label), top + ph / 2,
                 html_escape(c.y_label));
  for (size_t m = 0; m < c.markers.size(); ++m) {
    const auto& [x, label] = c.markers[m];
    if (!(x > 0)) continue;
    fmt::format_to(out,
                   "<line class=\"ref\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" "
                   "y2=\"{2:.1f}\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" fill=\"#c00\">{5}</text>",
                   X(x), top, top + ph, X(x) + 3, top + 12 + 14.0 * static_cast<double>(m % 4),
                   html_escape(label));
  }
  for (size_t i = 0; i < c.series.size(); ++i) {
    std::string pts;
    for (const auto& [x, y] : c.series[i].points)
      if (x > 0 && y > 0) fmt::format_to(std::back_inserter(pts), "{:.1f},{:.1f} ", X(x), Y(y));
    fmt::format_to(out,
                   "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\">"
                   "<title>{}</title></polyline>",
                   kPalette[i % kPaletteSize], pts, html_escape(c.series[i].name));
  }
  o += "</svg>";
  return o;
}

}  // namespace dtplan::reports
