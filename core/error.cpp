#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace dtplan {

std::string SourceLocation::to_string() const {
  if (file.empty()) return {};
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, column);
}

static std::string format_message(const SourceLocation& loc, const std::string& field,
                                  const std::string& reason) {
  std::string out = loc.to_string();
  if (!out.empty()) out += ": ";
  // A flag is named as the command line spells it; a file's field as a field.
  if (field.starts_with("--"))
    out += field + ": ";
  else if (!field.empty())
    out += fmt::format("field '{}': ", field);
  out += reason;
  return out;
}

InputError::InputError(SourceLocation location, std::string field, std::string reason)
    : std::runtime_error(format_message(location, field, reason)),
      location_(std::move(location)),
      field_(std::move(field)),
      reason_(std::move(reason)) {}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

template <typename Str>
static std::string nearest_impl(std::string_view name, std::span<const Str> known) {
  // Closest by edit distance; ties go to the shorter candidate. A candidate that contains the
  // name (or is contained in it) is plausible even when the distance is large.
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& k : known) {
    std::string_view kv(k);
    const size_t d = edit_distance(name, kv);
    if (d < best_d || (d == best_d && kv.size() < best.size())) {
      best_d = d;
      best = std::string(kv);
    }
  }
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  if (best_d <= limit) return best;
  for (const auto& k : known) {
    std::string_view kv(k);
    if (name.size() >= 3 &&
        (kv.find(name) != std::string_view::npos || name.find(kv) != std::string_view::npos))
      return std::string(kv);
  }
  return {};
}

std::string nearest_name(std::string_view name, std::span<const std::string_view> known) {
  return nearest_impl(name, known);
}
std::string nearest_name(std::string_view name, std::span<const std::string> known) {
  return nearest_impl(name, known);
}
std::string did_you_mean(std::string_view name, std::span<const std::string_view> known) {
  auto n = nearest_name(name, known);
  return n.empty() ? std::string{} : fmt::format(" (did you mean '{}'?)", n);
}
std::string did_you_mean(std::string_view name, std::span<const std::string> known) {
  auto n = nearest_name(name, known);
  return n.empty() ? std::string{} : fmt::format(" (did you mean '{}'?)", n);
}

}  // namespace dtplan
