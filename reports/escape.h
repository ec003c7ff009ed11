// Escaping of untrusted text (model names, scenario names, any string from an input file) for
// the HTML and SVG the reports write, and for JSON embedded in a page.
#pragma once

#include <string>
#include <string_view>

namespace dtplan::reports {

// & < > " ' become entities: safe in element text and in quoted attribute values.
std::string html_escape(std::string_view text);

// JSON text made safe inside <script type="application/json">: every '<' becomes \u003c (so
// neither "</script>" nor "<!--" can appear), and U+2028/U+2029 are escaped too. JSON has '<'
// only inside strings, where \u003c means the same character: JSON.parse gives the original.
std::string json_for_script(std::string_view json);

// Text for a Markdown table cell: '|' escaped, newlines flattened, '<' '&' written as entities so
// that no input can open an HTML tag in the rendered Markdown ('>' alone cannot), and '[' ']'
// '!' '`' escaped so that none can open a link, an image or code.
std::string markdown_cell(std::string_view text);

}  // namespace dtplan::reports
