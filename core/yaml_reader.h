// Strict, position-aware reading of YAML (and JSON, which yaml-cpp parses as YAML flow style).
// Internal to core's loaders: include it only from .cpp files, it pulls in yaml-cpp.
//
// Contract: every accessor throws InputError naming file:line:col, the dotted field path and the
// reason; finish() refuses keys that were never asked for, with the nearest known key.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace dtplan {

// Parses a whole file; a missing file or a syntax error becomes an InputError.
YAML::Node load_yaml_file(const std::string& path);

SourceLocation location_of(const YAML::Node& node, const std::string& file);

class YamlMap {
 public:
  // `path` is the dotted field path of this map ("" for the document root).
  YamlMap(const YAML::Node& node, std::string file, std::string path);

  bool has(std::string_view key);  // present and not null; marks the key as known
  const YAML::Node& node() const { return node_; }
  const std::string& file() const { return file_; }
  std::string field(std::string_view key) const;  // dotted path of a child

  // Every integer field is at most kMaxFieldInt (counts are stored as int; a larger value would
  // wrap to another number); fields whose products can grow have tighter bounds where read.
  static constexpr int64_t kMaxFieldInt = 2147483647;  // 2^31 - 1
  int64_t get_int(std::string_view key, int64_t min_value = 1, int64_t max_value = kMaxFieldInt);
  std::optional<int64_t> opt_int(std::string_view key, int64_t min_value = 1,
                                 int64_t max_value = kMaxFieldInt);
  double get_double(std::string_view key, double min_value, bool min_inclusive = false);
  std::optional<double> opt_double(std::string_view key, double min_value,
                                   bool min_inclusive = false);
  // A number in [lo, hi] (both inclusive): the documented physical range of the field.
  double get_double_in(std::string_view key, double lo, double hi);
  std::optional<double> opt_double_in(std::string_view key, double lo, double hi);
  bool get_bool(std::string_view key);
  std::optional<bool> opt_bool(std::string_view key);
  std::string get_string(std::string_view key);
  std::optional<std::string> opt_string(std::string_view key);
  // A string that must be one of `choices`.
  std::string get_enum(std::string_view key, const std::vector<std::string>& choices);
  std::optional<std::string> opt_enum(std::string_view key,
                                      const std::vector<std::string>& choices);
  // A nested map, or nullopt when the key is absent or null.
  std::optional<YamlMap> opt_map(std::string_view key);
  YamlMap get_map(std::string_view key);
  // The raw child node (marks the key as known); undefined node when absent.
  YAML::Node child(std::string_view key);

  // Declares keys that are accepted but not read by this loader.
  void allow(std::string_view key);
  // Throws on the first key that no accessor asked for.
  void finish() const;

  [[noreturn]] void fail(std::string_view key, const std::string& reason) const;
  [[noreturn]] void fail_here(const std::string& reason) const;

 private:
  YAML::Node require(std::string_view key);
  YAML::Node lookup(std::string_view key);

  YAML::Node node_;
  std::string file_;
  std::string path_;
  std::vector<std::string> known_;
};

// Scalar conversions with precise errors, for nodes outside a map (sequence items).
int64_t scalar_int(const YAML::Node& node, const std::string& file, const std::string& field);
double scalar_double(const YAML::Node& node, const std::string& file, const std::string& field);

// An int or a non-empty list of ints, each in [min_value, max_value].
std::vector<int> int_list(const YAML::Node& n, const std::string& file, const std::string& field,
                          int min_value, int max_value);
// A name or a non-empty list of names, each one of `choices` ("did you mean" otherwise).
std::vector<std::string> string_list(const YAML::Node& n, const std::string& file,
                                     const std::string& field,
                                     const std::vector<std::string>& choices);
// A file named relative to the YAML file that names it, when such a file exists there; else
// the name as given (a zoo name, or a path relative to the working directory).
std::string relative_to(const std::string& name, const std::string& file);

}  // namespace dtplan
