#include "reports/escape.h"

namespace dtplan::reports {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string json_for_script(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 64);
  for (size_t i = 0; i < json.size(); ++i) {
    const char ch = json[i];
    if (ch == '<') {
      out += "\\u003c";
    } else if (ch == '\xE2' && i + 2 < json.size() && json[i + 1] == '\x80' &&
               (json[i + 2] == '\xA8' || json[i + 2] == '\xA9')) {
      out += json[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string markdown_cell(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char ch : text) {
    switch (ch) {
      case '|':
        out += "\\|";
        break;
      case '\n':
      case '\r':
        out += ' ';
        break;
      case '<':
        out += "&lt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '`':
        out += "\\`";
        break;
      // No link or image from a name: `[x](u)` and `![x](u)` lose their brackets' meaning.
      case '[':
        out += "\\[";
        break;
      case ']':
        out += "\\]";
        break;
      case '!':
        out += "\\!";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

}  // namespace dtplan::reports
