#include "reports/renderers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "core/error.h"
#include "core/units.h"

namespace dtplan::reports {

Format format_from_path(const std::string& path, const std::string& flag) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (ext == ".html" || ext == ".htm") return Format::kHtml;
  if (ext == ".md" || ext == ".markdown") return Format::kMarkdown;
  throw InputError(
      {}, flag, "'" + path + "': the extension picks the format: .html (HTML) or .md (Markdown)");
}

std::string gib_text(double bytes) { return fmt::format("{:.1f}", bytes / units::kGiB); }
std::string pct_text(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }

std::string render_report(const ReportData& d, Format f) {
  return f == Format::kHtml ? render_report_html(d) : render_report_markdown(d);
}

std::string render_whatif(const WhatifData& d, Format f) {
  return f == Format::kHtml ? render_whatif_html(d) : render_whatif_markdown(d);
}

}  // namespace dtplan::reports
