// Renderers: a ReportData or a WhatifData to one output format. Each format is one file
// (html_renderer.cpp, markdown_renderer.cpp) reading only report_data.h; charts come from
// svg_chart.h. Every string from the user's input is escaped for the format.
#pragma once

#include <string>

#include "reports/report_data.h"

namespace dtplan::reports {

enum class Format { kHtml, kMarkdown };

// .html/.htm -> HTML, .md/.markdown -> Markdown; anything else is an InputError naming `flag`.
Format format_from_path(const std::string& path, const std::string& flag);

// Self-contained HTML: inline CSS and SVG, no script to run, no network; prints on paper. The
// source JSON is embedded in <script type="application/json" id="dtplan-source"> with '<'
// escaped as \u003c.
std::string render_report_html(const ReportData& d);
std::string render_whatif_html(const WhatifData& d);

// GitHub-flavoured Markdown with no raw HTML: headings, lists and pipe tables; the charts'
// data as tables; the source JSON in a fenced ```json block ('<' escaped as \u003c).
std::string render_report_markdown(const ReportData& d);
std::string render_whatif_markdown(const WhatifData& d);

std::string render_report(const ReportData& d, Format f);

// Shared by the renderers: bytes as GiB with one decimal ("12.3"), a fraction as a percentage
// with one decimal ("45.6%").
std::string gib_text(double bytes);
std::string pct_text(double fraction);
std::string render_whatif(const WhatifData& d, Format f);

}  // namespace dtplan::reports
