// The model zoo (models/) and the shipped hardware profiles (hardware_profiles/): where they
// are, what they hold, and how a name given on the command line becomes a file.
#pragma once

#include <string>
#include <vector>

#include "core/hardware.h"
#include "core/model_spec.h"

namespace dtplan {

// The folder holding models/ and hardware_profiles/: $DTPLAN_DATA_DIR, else the source tree
// the binary was built from.
std::string data_dir();

std::vector<std::string> list_model_names();    // file stems, sorted
std::vector<std::string> list_profile_names();  // file stems, sorted

// A zoo name ("llama3-70b") or a path to a YAML/JSON file. Throws InputError naming the
// closest zoo entry when neither exists.
std::string resolve_model_path(const std::string& name_or_path);
std::string resolve_profile_path(const std::string& name_or_path);

ModelSpec load_model(const std::string& name_or_path);
HardwareProfile load_profile(const std::string& name_or_path);

// Framework profiles (frameworks/*.yaml, core/framework_profile.h).
std::vector<std::string> list_framework_profile_names();
bool has_framework_profile(const std::string& name);
struct FrameworkProfile;
// `spec` is NAME (or a file) with an optional @VERSION (the profile's overrides for it).
FrameworkProfile load_framework_profile(const std::string& spec);

// `--cluster` takes a profile (name or file; then gpus is required) or a cluster YAML
// (profile + nodes; gpus, when > 0, must fit).
Cluster load_cluster(const std::string& name_or_path, int gpus);

}  // namespace dtplan
