// Framework profiles (frameworks/*.yaml): what a training framework does by default, as data
// beside the hardware profiles, each value with its source in the framework's own code. Today a
// profile states the fused attention kernel the framework runs (a preference list: the first
// kernel the hardware profile has a curve for is used, as Transformer Engine prefers cuDNN on
// Hopper and flash-attn elsewhere) and the defaults of its communication overlaps, which the
// accuracy runner applies to cases that do not state them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/hardware.h"

namespace dtplan {

struct FrameworkProfile {
  std::string name, description;
  std::vector<std::string> attention_kernels;  // preference order
  std::string attention_source;
  // Defaults when a run does not say (null: the profile does not settle it).
  std::optional<bool> tp_comm_overlap, grad_reduce_overlap, param_gather_overlap;
  std::string overlap_source;
};

FrameworkProfile load_framework_profile_file(const std::string& path);

// Puts the framework's attention kernel curve into hw's efficiency (attention_*); returns the
// kernel used, or "" when the profile has none of the framework's kernels (its default kept).
std::string apply_attention_kernel(const FrameworkProfile& f, HardwareProfile& hw);

}  // namespace dtplan
