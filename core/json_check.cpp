#include "core/json_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace dtplan {

namespace {

// Accepts every event; records the first parse error (nlohmann's SAX interface).
struct Validator final : nlohmann::json_sax<nlohmann::json> {
  std::size_t byte = 0;
  std::string what;
  bool failed = false;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    failed = true;
    byte = position;
    what = ex.what();
    return false;
  }
};

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line L,
// column C: " prefix (the location is given as file:line:col).
std::string reason_of(const std::string& what) {
  const auto colon = what.find(": ");
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

}  // namespace

void check_strict_json(const std::string& text, const std::string& path) {
  // An empty (or blank) file is reported as such by the YAML reader.
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return;
  Validator v;
  nlohmann::json::sax_parse(text, &v, nlohmann::json::input_format_t::json, /*strict=*/true,
                            /*ignore_comments=*/false);
  if (!v.failed) return;
  // nlohmann counts the offending character as read: position is one past it (1-based).
  const std::size_t at = v.byte > 0 ? std::min(v.byte - 1, text.size()) : 0;
  int line = 1, col = 1;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  // Name the leniencies YAML would have let through.
  std::string hint;
  if (at < text.size()) {
    const char c = text[at];
    const auto prev = at == 0 ? std::string::npos : text.find_last_not_of(" \t\r\n", at - 1);
    if ((c == '}' || c == ']') && prev != std::string::npos && text[prev] == ',')
      hint = "; JSON allows no trailing comma";
    else if (c == '\'')
      hint = "; JSON strings take double quotes";
    else if (c == '#' || c == '/')
      hint = "; JSON has no comments";
  }
  throw InputError({path, line, col}, "",
                   fmt::format("not valid JSON: {}{}", reason_of(v.what), hint));
}

}  // namespace dtplan
