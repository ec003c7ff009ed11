// Errors a user can cause (bad files, bad flags, impossible layouts) are InputError values
// thrown at the loading boundary and turned into exit code 2 by the CLI. Bugs are asserts.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dtplan {

// The process's exit codes (the CLI's help footer lists them): 1 an internal error, 2 bad input
// (file, flag or layout), 3 a claim refuted (check --claims), 4 a run ended by its watchdog
// (calibrate, execute: a peer stopped or dead).
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitRefuted = 3;
inline constexpr int kExitWatchdog = 4;

// A position in an input file; line and column are 1-based, 0 when unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  std::string to_string() const;  // "file:line:col", "file" or "" as known
};

// Contract: what() is the full one-line message "file:line:col: field 'f': reason".
class InputError : public std::runtime_error {
 public:
  InputError(SourceLocation location, std::string field, std::string reason);

  const SourceLocation& location() const { return location_; }
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  SourceLocation location_;
  std::string field_;
  std::string reason_;
};

// Levenshtein distance.
size_t edit_distance(std::string_view a, std::string_view b);

// The known name closest to `name` by edit distance, or "" when none is plausibly meant.
std::string nearest_name(std::string_view name, std::span<const std::string_view> known);
std::string nearest_name(std::string_view name, std::span<const std::string> known);

// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view name, std::span<const std::string_view> known);
std::string did_you_mean(std::string_view name, std::span<const std::string> known);

}  // namespace dtplan
