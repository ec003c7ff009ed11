#include "core/catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/framework_profile.h"
#include "core/yaml_reader.h"

#ifndef DTPLAN_DATA_DIR_DEFAULT
#define DTPLAN_DATA_DIR_DEFAULT "."
#endif

namespace fs = std::filesystem;

namespace dtplan {

std::string data_dir() {
  if (const char* env = std::getenv("DTPLAN_DATA_DIR"); env && *env) return env;
  return DTPLAN_DATA_DIR_DEFAULT;
}

static std::vector<std::string> list_stems(const std::string& sub) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(data_dir()) / sub, ec)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> list_model_names() { return list_stems("models"); }
std::vector<std::string> list_profile_names() { return list_stems("hardware_profiles"); }

static bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || s.ends_with(".yaml") || s.ends_with(".yml") ||
         s.ends_with(".json");
}

static std::string resolve(const std::string& name, const std::string& sub, const char* what,
                           const char* list_cmd) {
  std::error_code ec;
  if (looks_like_path(name) || fs::is_regular_file(name, ec)) {
    if (!fs::exists(name, ec)) throw InputError({name, 0, 0}, "", "file not found");
    return name;
  }
  // A link that leads nowhere (a loop, a missing target) is a file the user meant, not a name.
  if (fs::is_symlink(fs::symlink_status(name, ec)) && !fs::exists(name, ec))
    throw InputError({name, 0, 0}, "",
                     "is a symbolic link that leads to no file (a loop or a missing target)");
  fs::path p = fs::path(data_dir()) / sub / (name + ".yaml");
  if (fs::is_regular_file(p, ec)) return p.string();
  auto names = list_stems(sub);
  throw InputError({}, "",
                   fmt::format("unknown {} '{}'{}; `dtplan list {}` shows the {} known ones, or "
                               "give a file path",
                               what, name, did_you_mean(name, std::span<const std::string>(names)),
                               list_cmd, names.size()));
}

std::string resolve_model_path(const std::string& n) {
  return resolve(n, "models", "model", "models");
}
std::string resolve_profile_path(const std::string& n) {
  return resolve(n, "hardware_profiles", "hardware profile", "profiles");
}

ModelSpec load_model(const std::string& name_or_path) {
  return load_model_file(resolve_model_path(name_or_path));
}

HardwareProfile load_profile(const std::string& name_or_path) {
  return load_profile_file(resolve_profile_path(name_or_path));
}

std::vector<std::string> list_framework_profile_names() { return list_stems("frameworks"); }

bool has_framework_profile(const std::string& name) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(data_dir()) / "frameworks" / (name + ".yaml"), ec);
}

FrameworkProfile load_framework_profile(const std::string& spec) {
  // NAME[@VERSION]: a version picks the profile's overrides for it.
  const size_t at = spec.rfind('@');
  const std::string name = at == std::string::npos ? spec : spec.substr(0, at);
  const std::string version = at == std::string::npos ? "" : spec.substr(at + 1);
  return load_framework_profile_file(resolve(name, "frameworks", "framework profile", "frameworks"),
                                     version);
}

static std::string resolve_profile_cb(const std::string& n) { return resolve_profile_path(n); }

Cluster load_cluster(const std::string& name_or_path, int gpus) {
  std::string path = resolve_profile_path(name_or_path);
  // A cluster YAML has a `profile:` key at the top; a hardware profile has `gpu:`.
  YAML::Node root = load_yaml_file(path);
  Cluster c;
  const YAML::Node& croot = root;
  if (croot.IsMap() && (croot["profile"].IsDefined() || !croot["gpu"].IsDefined())) {
    c = load_cluster_file(path, &resolve_profile_cb);
    if (gpus > 0) {
      if (gpus > c.nodes() * c.profile.node.gpus_per_node)
        throw InputError({}, "--gpus",
                         fmt::format("{} GPUs exceed the {} nodes x {} GPUs of cluster {}", gpus,
                                     c.nodes(), c.profile.node.gpus_per_node, path));
      c.num_gpus = gpus;
    }
    return c;
  }
  c.profile = load_profile_file(path);
  if (gpus <= 0)
    throw InputError({}, "--gpus",
                     fmt::format("'{}' is a hardware profile: say how many GPUs with --gpus N "
                                 "(or give a cluster YAML with profile and nodes)",
                                 name_or_path));
  c.num_gpus = gpus;
  return c;
}

}  // namespace dtplan
