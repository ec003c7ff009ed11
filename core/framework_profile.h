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
  // Whose launch rules and software stack the framework runs on: megatron (Megatron-LM, NeMo,
  // Megatron-Bridge), deepspeed, torchtitan, or other (its own trainer): the regime feature of
  // dtplan's error bands (simulator/validation/error_bands.h).
  std::string stack = "other";
  std::vector<std::string> attention_kernels;  // preference order
  std::string attention_source;
  // Defaults when a run does not say (null: the profile does not settle it).
  std::optional<bool> tp_comm_overlap, grad_reduce_overlap, param_gather_overlap;
  std::string overlap_source;
  // The share of the kernel efficiencies (GEMM, attention) the framework's stack reaches, 1 for
  // Megatron/Transformer Engine, whose kernels the hardware profiles' curves describe; below 1
  // for stacks with more unfused, eager work per layer. Fitted only by
  // scripts/fit_efficiency.py --framework (docs/accuracy.md), over every GPU generation the
  // framework's cases run on.
  double compute_efficiency = 1.0;
  std::string compute_source;
};

FrameworkProfile load_framework_profile_file(const std::string& path);

// Puts the framework's attention kernel curve into hw's efficiency (attention_*); returns the
// kernel used, or "" when the profile has none of the framework's kernels (its default kept).
std::string apply_attention_kernel(const FrameworkProfile& f, HardwareProfile& hw);

// The framework's kernel choice and compute efficiency applied to hw: the attention kernel as
// above, then the GEMM and attention asymptotes scaled by compute_efficiency.
std::string apply_framework_profile(const FrameworkProfile& f, HardwareProfile& hw);

}  // namespace dtplan
