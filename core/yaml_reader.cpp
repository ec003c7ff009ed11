#include "core/yaml_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "core/input_file.h"
#include "core/json_check.h"

namespace dtplan {

namespace {

// Records where a document starts and whether it holds anything but one null.
class DocumentProbe final : public YAML::EventHandler {
 public:
  YAML::Mark start;
  bool only_null = true;
  void OnDocumentStart(const YAML::Mark& m) override {
    start = m;
    only_null = true;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { only_null = false; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    only_null = false;
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    only_null = false;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    only_null = false;
  }
  void OnMapEnd() override {}
};

// The first byte that is not part of well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), as a located error: names and paths from a file reach
// the JSON outputs, which hold UTF-8 only.
void check_utf8(const std::string& text, const std::string& path) {
  int line = 1, col = 1;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= text.size();
    uint32_t cp = n == 1 ? b : n == 2 ? (b & 0x1Fu) : n == 3 ? (b & 0x0Fu) : (b & 0x07u);
    for (size_t k = 1; ok && k < n; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      ok = (c >> 6) == 0x2;
      cp = (cp << 6) | (c & 0x3Fu);
    }
    if (ok)
      ok = (n == 1) || (n == 2 && cp >= 0x80) ||
           (n == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
           (n == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
    if (!ok)
      throw InputError({path, line, col}, "",
                       fmt::format("invalid UTF-8 (byte 0x{:02X}); files must be UTF-8 text", b));
    // YAML excludes control characters other than tab, line feed and carriage return (YAML 1.2
    // §5.1, c-printable); yaml-cpp reads a NUL as the end of the stream and then reports marks
    // past it (found by fuzz_model_yaml, 2026-12-02).
    if (b < 0x20 && b != '\t' && b != '\n' && b != '\r')
      throw InputError({path, line, col}, "",
                       fmt::format("control character 0x{:02X}: a YAML or JSON file holds "
                                   "printable text only",
                                   b));
    if (b == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
    i += n;
  }
}

// yaml-cpp 0.7 (Debian 12's) loops for ever in LoadAll, allocating, when a document starts with
// a token its parser cannot place, e.g. a file holding ",": the parser reports a null document
// without consuming the token, again and again (jbeder/yaml-cpp#1040; fixed upstream by #1319,
// after 0.7.0). So the documents are probed here, two at most, before YAML::Load builds the
// first: a second "document" that is a lone null where no '---' or '...' starts is that token,
// and a syntax error at it.
void probe_documents(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentProbe probe;
  if (!parser.HandleNextDocument(probe)) return;  // empty: the caller says so
  const YAML::Mark first = probe.start;
  const bool first_null = probe.only_null;
  if (!parser.HandleNextDocument(probe)) return;
  const YAML::Mark m = probe.start;
  const auto at = std::min(text.size(), static_cast<size_t>(std::max(0, m.pos)));
  const bool marker = text.compare(at, 3, "---") == 0 || text.compare(at, 3, "...") == 0;
  if ((probe.only_null && !marker) || (m.pos == first.pos && first_null)) {
    const char ch = at < text.size() ? text[at] : ' ';
    throw InputError({path, m.line + 1, m.column + 1}, "",
                     ch >= 0x21 && ch <= 0x7e ? fmt::format("syntax error: unexpected '{}'", ch)
                                              : std::string("syntax error: unexpected character"));
  }
  throw InputError({path, m.line + 1, m.column + 1}, "",
                   "the file holds more than one YAML document ('---'); give one");
}

struct OpenMark {
  char ch;
  int line, column;  // 1-based
};

// Whether the quote at text[i] starts a scalar: only blanks since the line's start
// (`line_start`), or an indicator before it. Bounded by the line's start, so scanning a long
// single-line JSON file stays linear (issue #21: a copy of the line per quote made it
// quadratic).
bool starts_scalar(const std::string& text, size_t line_start, size_t i) {
  size_t j = i;
  while (j > line_start && (text[j - 1] == ' ' || text[j - 1] == '\t')) --j;
  if (j == line_start) return true;
  const char prev = text[j - 1];
  return prev == ':' || prev == '-' || prev == '[' || prev == '{' || prev == ',';
}

struct QuotedSpan {
  OpenMark open;
  int end_line = 0;  // 0 = never closed
};

// Finds every quoted scalar (a quote that starts a scalar; a quote inside a plain scalar is
// literal) and where it ends. YAML lets quoted scalars span lines; when one is never closed,
// or swallows the next lines into a syntax error, the opening quote is the place to report.
std::vector<QuotedSpan> quoted_spans(const std::string& text) {
  std::vector<QuotedSpan> spans;
  int line_no = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '\n') {
      ++line_no;
      line_start = i + 1;
      continue;
    }
    if (ch == '#' && (i == line_start || text[i - 1] == ' ' || text[i - 1] == '\t')) {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (ch != '"' && ch != '\'') continue;
    if (!starts_scalar(text, line_start, i)) continue;
    QuotedSpan span{{ch, line_no, static_cast<int>(i - line_start) + 1}, 0};
    int l = line_no;
    size_t j = i + 1;
    for (; j < text.size(); ++j) {
      if (text[j] == '\n') {
        ++l;
        line_start = j + 1;
        continue;
      }
      if (ch == '"' && text[j] == '\\') {
        ++j;
        continue;
      }
      if (text[j] == ch) {
        if (ch == '\'' && j + 1 < text.size() && text[j + 1] == '\'') {
          ++j;
          continue;
        }
        span.end_line = l;
        break;
      }
    }
    line_no = l;
    spans.push_back(span);
    i = j;
  }
  return spans;
}

void check_quotes_closed(const std::string& text, const std::string& path) {
  for (const QuotedSpan& q : quoted_spans(text))
    if (q.end_line == 0)
      throw InputError(
          {path, q.open.line, q.open.column}, "",
          fmt::format("syntax error: the string opened here with {} is never closed", q.open.ch));
}

// A quoted scalar opened on an earlier line than a syntax error that runs into it.
std::optional<OpenMark> runaway_quote_before(const std::string& text, int error_line) {
  std::optional<OpenMark> found;
  for (const QuotedSpan& q : quoted_spans(text))
    if (q.open.line < error_line && (q.end_line == 0 || q.end_line >= error_line) &&
        q.end_line != q.open.line)
      found = q.open;
  return found;
}

// The innermost flow bracket ({ or [) opened on an earlier line than `error_line` and still
// open there, for YAML files (JSON nests brackets across lines by design).
std::optional<OpenMark> unclosed_bracket_before(const std::string& text, int error_line) {
  std::vector<OpenMark> stack;
  int line = 1, col = 0;
  bool in_quote = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    ++col;
    if (ch == '\n') {
      if (line + 1 > error_line) break;
      ++line;
      col = 0;
      in_quote = false;
      continue;
    }
    if (in_quote) {
      if (ch == quote) in_quote = false;
      continue;
    }
    if (ch == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (ch == '"' || ch == '\'') {
      in_quote = true;
      quote = ch;
    } else if (ch == '{' || ch == '[') {
      stack.push_back({ch, line, col});
    } else if ((ch == '}' || ch == ']') && !stack.empty()) {
      stack.pop_back();
    }
  }
  if (!stack.empty() && stack.back().line < error_line) return stack.back();
  return std::nullopt;
}

}  // namespace

YAML::Node load_yaml_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError({path, 0, 0}, "", "is a directory, expected a YAML or JSON file");
  const std::string text = read_input_file(path);
  check_utf8(text, path);
  check_quotes_closed(text, path);
  const bool json = path.ends_with(".json");
  if (json) check_strict_json(text, path);
  try {
    probe_documents(text, path);
    YAML::Node doc = YAML::Load(text);
    if (!doc.IsDefined() || doc.IsNull()) throw InputError({path, 1, 1}, "", "file is empty");
    return doc;
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line + 1, col = e.mark.column + 1;
    if (auto q = runaway_quote_before(text, line))
      throw InputError({path, q->line, q->column}, "",
                       fmt::format("syntax error: the string opened here with {} runs on to line "
                                   "{} (yaml-cpp: {})",
                                   q->ch, line, e.msg));
    if (!json) {
      if (auto open = unclosed_bracket_before(text, line))
        throw InputError({path, open->line, open->column}, "",
                         fmt::format("syntax error: the '{}' opened here is not closed "
                                     "(yaml-cpp stopped at line {}, column {}: {})",
                                     open->ch, line, col, e.msg));
    }
    throw InputError({path, line, col}, "", fmt::format("syntax error: {}", e.msg));
  }
}

SourceLocation location_of(const YAML::Node& node, const std::string& file) {
  if (!node.IsDefined()) return {file, 0, 0};
  YAML::Mark m = node.Mark();
  if (m.is_null()) return {file, 0, 0};
  return {file, m.line + 1, m.column + 1};
}

static const char* kind_name(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "null";
    default:
      return "nothing";
  }
}

YamlMap::YamlMap(const YAML::Node& node, std::string file, std::string path)
    : node_(node), file_(std::move(file)), path_(std::move(path)) {
  if (!node_.IsMap())
    throw InputError(location_of(node_, file_), path_.empty() ? "(document)" : path_,
                     fmt::format("expected a map of key: value pairs, got {}", kind_name(node_)));
  // Duplicate keys are silently merged by yaml-cpp; refuse them.
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    if (!kv.first.IsScalar())
      throw InputError(location_of(kv.first, file_), path_, "keys must be plain strings");
    const std::string key = kv.first.Scalar();
    if (!seen.insert(key).second)
      throw InputError(location_of(kv.first, file_), field(key), "duplicate key");
  }
}

std::string YamlMap::field(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void YamlMap::allow(std::string_view key) { known_.emplace_back(key); }

YAML::Node YamlMap::lookup(std::string_view key) {
  known_.emplace_back(key);
  for (const auto& kv : node_)
    if (kv.first.Scalar() == key) return kv.second;
  return YAML::Node(YAML::NodeType::Undefined);
}

bool YamlMap::has(std::string_view key) {
  YAML::Node n = lookup(key);
  return n.IsDefined() && !n.IsNull();
}

YAML::Node YamlMap::child(std::string_view key) { return lookup(key); }

void YamlMap::fail(std::string_view key, const std::string& reason) const {
  YAML::Node n(YAML::NodeType::Undefined);
  for (const auto& kv : node_)
    if (kv.first.Scalar() == key) n = kv.second;
  throw InputError(n.IsDefined() ? location_of(n, file_) : location_of(node_, file_), field(key),
                   reason);
}

void YamlMap::fail_here(const std::string& reason) const {
  throw InputError(location_of(node_, file_), path_.empty() ? "(document)" : path_, reason);
}

YAML::Node YamlMap::require(std::string_view key) {
  YAML::Node n = lookup(key);
  if (!n.IsDefined()) {
    // A present key that is not known and is close to the missing one is a misspelling of it.
    for (const auto& kv : node_) {
      const std::string present = kv.first.Scalar();
      if (std::find(known_.begin(), known_.end(), present) != known_.end()) continue;
      const size_t d = edit_distance(present, key);
      if (d <= 2 && 2 * d < key.size())
        throw InputError(location_of(kv.first, file_), field(present),
                         fmt::format("unknown key '{}' (did you mean '{}'?)", present, key));
    }
    throw InputError(location_of(node_, file_), field(key),
                     fmt::format("required field '{}' is missing", key));
  }
  if (n.IsNull()) throw InputError(location_of(n, file_), field(key), "must not be null");
  return n;
}

// A quoted scalar ("16384") is a string in YAML and JSON, never a number or a boolean.
static bool is_quoted(const YAML::Node& n) { return n.Tag() == "!"; }

int64_t scalar_int(const YAML::Node& n, const std::string& file, const std::string& field) {
  if (!n.IsScalar())
    throw InputError(location_of(n, file), field,
                     fmt::format("expected an integer, got {}", kind_name(n)));
  const std::string& s = n.Scalar();
  if (is_quoted(n))
    throw InputError(
        location_of(n, file), field,
        fmt::format("expected an integer, got the string \"{}\" (remove the quotes)", s));
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE) {
    // Accept integral floats written like 1e9 or 4096.0.
    char* dend = nullptr;
    double d = std::strtod(s.c_str(), &dend);
    if (!s.empty() && dend == s.c_str() + s.size() && std::isfinite(d) && std::floor(d) == d &&
        std::fabs(d) < 9.0e18)
      return static_cast<int64_t>(d);
    throw InputError(location_of(n, file), field, fmt::format("expected an integer, got '{}'", s));
  }
  return v;
}

double scalar_double(const YAML::Node& n, const std::string& file, const std::string& field) {
  if (!n.IsScalar())
    throw InputError(location_of(n, file), field,
                     fmt::format("expected a number, got {}", kind_name(n)));
  const std::string& s = n.Scalar();
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (is_quoted(n)) {
    // Suggest dropping the quotes only where that gives a number.
    const bool number = !s.empty() && end == s.c_str() + s.size() && std::isfinite(v);
    throw InputError(
        location_of(n, file), field,
        fmt::format("expected a number, got the string \"{}\"{}", s,
                    number ? " (remove the quotes)" : " (write it as a number: 1e12, 0.45, 4096)"));
  }
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
    throw InputError(location_of(n, file), field, fmt::format("expected a number, got '{}'", s));
  return v;
}

int64_t YamlMap::get_int(std::string_view key, int64_t min_value, int64_t max_value) {
  YAML::Node n = require(key);
  int64_t v = scalar_int(n, file_, field(key));
  if (v < min_value)
    throw InputError(location_of(n, file_), field(key),
                     fmt::format("must be >= {}, got {}", min_value, v));
  if (v > max_value)
    throw InputError(location_of(n, file_), field(key),
                     fmt::format("must be <= {}, got {}", max_value, v));
  return v;
}

std::optional<int64_t> YamlMap::opt_int(std::string_view key, int64_t min_value,
                                        int64_t max_value) {
  if (!has(key)) return std::nullopt;
  return get_int(key, min_value, max_value);
}

double YamlMap::get_double(std::string_view key, double min_value, bool min_inclusive) {
  YAML::Node n = require(key);
  double v = scalar_double(n, file_, field(key));
  if (min_inclusive ? v < min_value : v <= min_value)
    throw InputError(
        location_of(n, file_), field(key),
        fmt::format("must be {} {}, got {}", min_inclusive ? ">=" : ">", min_value, v));
  return v;
}

std::optional<double> YamlMap::opt_double(std::string_view key, double min_value,
                                          bool min_inclusive) {
  if (!has(key)) return std::nullopt;
  return get_double(key, min_value, min_inclusive);
}

double YamlMap::get_double_in(std::string_view key, double lo, double hi) {
  YAML::Node n = require(key);
  const double v = scalar_double(n, file_, field(key));
  if (!(v >= lo && v <= hi))
    throw InputError(location_of(n, file_), field(key),
                     fmt::format("must be in [{:g}, {:g}], got {:g}", lo, hi, v));
  return v;
}

std::optional<double> YamlMap::opt_double_in(std::string_view key, double lo, double hi) {
  if (!has(key)) return std::nullopt;
  return get_double_in(key, lo, hi);
}

bool YamlMap::get_bool(std::string_view key) {
  YAML::Node n = require(key);
  if (n.IsScalar() && !is_quoted(n)) {
    const std::string& s = n.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  throw InputError(location_of(n, file_), field(key),
                   fmt::format("expected true or false, got '{}'",
                               n.IsScalar() ? n.Scalar() : std::string(kind_name(n))));
}

std::optional<bool> YamlMap::opt_bool(std::string_view key) {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}

std::string YamlMap::get_string(std::string_view key) {
  YAML::Node n = require(key);
  if (!n.IsScalar())
    throw InputError(location_of(n, file_), field(key),
                     fmt::format("expected a string, got {}", kind_name(n)));
  return n.Scalar();
}

std::optional<std::string> YamlMap::opt_string(std::string_view key) {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

std::string YamlMap::get_enum(std::string_view key, const std::vector<std::string>& choices) {
  std::string v = get_string(key);
  if (std::find(choices.begin(), choices.end(), v) == choices.end())
    fail(key, fmt::format("'{}' is not one of: {}{}", v, fmt::join(choices, ", "),
                          did_you_mean(v, std::span<const std::string>(choices))));
  return v;
}

std::optional<std::string> YamlMap::opt_enum(std::string_view key,
                                             const std::vector<std::string>& choices) {
  if (!has(key)) return std::nullopt;
  return get_enum(key, choices);
}

std::optional<YamlMap> YamlMap::opt_map(std::string_view key) {
  YAML::Node n = lookup(key);
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  return YamlMap(n, file_, field(key));
}

YamlMap YamlMap::get_map(std::string_view key) { return YamlMap(require(key), file_, field(key)); }

void YamlMap::finish() const {
  for (const auto& kv : node_) {
    const std::string key = kv.first.Scalar();
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    throw InputError(location_of(kv.first, file_), field(key),
                     fmt::format("unknown key '{}'{}", key,
                                 did_you_mean(key, std::span<const std::string>(known_))));
  }
}

// An int or a list of ints, each >= min_value (and <= max_value).
std::vector<int> int_list(const YAML::Node& n, const std::string& file, const std::string& field,
                          int min_value, int max_value) {
  std::vector<int> out;
  auto one = [&](const YAML::Node& x) {
    const int64_t v = scalar_int(x, file, field);
    if (v < min_value || v > max_value)
      throw InputError(location_of(x, file), field,
                       fmt::format("{} is out of range ({}-{})", v, min_value, max_value));
    out.push_back(static_cast<int>(v));
  };
  if (n.IsSequence()) {
    if (n.size() == 0)
      throw InputError(location_of(n, file), field, "an empty list allows nothing");
    for (const auto& x : n) one(x);
  } else {
    one(n);
  }
  return out;
}

std::vector<std::string> string_list(const YAML::Node& n, const std::string& file,
                                     const std::string& field,
                                     const std::vector<std::string>& choices) {
  std::vector<std::string> out;
  auto one = [&](const YAML::Node& x) {
    if (!x.IsScalar())
      throw InputError(location_of(x, file), field, "expected a name or a list of names");
    const std::string& s = x.Scalar();
    if (std::find(choices.begin(), choices.end(), s) == choices.end())
      throw InputError(location_of(x, file), field,
                       fmt::format("'{}' is not one of {}{}", s, fmt::join(choices, ", "),
                                   did_you_mean(s, std::span<const std::string>(choices))));
    out.push_back(s);
  };
  if (n.IsSequence()) {
    if (n.size() == 0)
      throw InputError(location_of(n, file), field, "an empty list allows nothing");
    for (const auto& x : n) one(x);
  } else {
    one(n);
  }
  return out;
}

// A model or cluster named relative to the scenarios file when such a file exists there.
std::string relative_to(const std::string& name, const std::string& file) {
  namespace fs = std::filesystem;
  const fs::path p = fs::path(file).parent_path() / name;
  std::error_code ec;
  if (!fs::path(name).is_absolute() && fs::is_regular_file(p, ec)) return p.string();
  return name;
}

}  // namespace dtplan
