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
#include "core/plan.h"

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
  // A further share of the attention kernel's curve alone (1: the curve times
  // compute_efficiency): a stack whose fused attention runs further below the kernel's published
  // curves than its GEMMs below theirs. Fitted only by scripts/fit_efficiency.py --framework.
  double attention_efficiency = 1.0;
  std::string compute_source;
  // ZeRO-3 / FSDP: one all-gather per parameter tensor (true) or per layer (false); null: the
  // plan's default (per layer). Plan::zero3_gather_per_tensor.
  std::optional<bool> zero3_gather_per_tensor;
  std::optional<bool> zero3_prefetch;  // null: the plan's default (prefetched)
  std::string zero3_source;
  // Gradients kept and reduced in fp32 (Megatron's main_grad buffer, grad_reduce_in_fp32) or in
  // the 16-bit training type; null: the plan's default (fp32). Plan::main_grads_fp32.
  std::optional<bool> main_grads_fp32;
  std::string gradients_source;
  // Adam's state bytes per parameter (Plan::optimizer_state_bytes_per_param); null: 12.
  std::optional<double> optimizer_state_bytes_per_param;
  std::string optimizer_source;
  // The CUDA context per process (Plan::cuda_context_bytes); null: lazy module loading's 300 MB.
  std::optional<double> cuda_context_bytes;
  std::string runtime_source;
  // The FP8 scaling recipe the framework runs when a run says only "FP8".
  std::optional<Fp8Recipe> fp8_recipe;
  std::string fp8_source;
  // The versions the profile describes (`--framework NAME@VERSION`); each may override any of
  // the sections above (`versions: {VERSION: {attention: ..., overlap: ..., ...}}`). The values
  // above are the profile's for every listed version that does not override them.
  std::vector<std::string> versions;
  std::string version;  // the one selected, "" = none named
};

// Loads a profile; with `version` non-empty, applies that version's overrides (InputError naming
// the known versions when the profile does not list it).
FrameworkProfile load_framework_profile_file(const std::string& path,
                                             const std::string& version = "");

// The framework's defaults for what a run does not say: its overlaps (where set), its ZeRO-3
// gather granularity and, under FP8, its scaling recipe. `given` lists what the caller's user
// set explicitly, which the profile does not change.
struct FrameworkPlanGiven {
  bool tp_comm_overlap = false, grad_reduce_overlap = false, param_gather_overlap = false;
  bool fp8_recipe = false;
  bool grads = false;
};
void apply_framework_defaults(const FrameworkProfile& f, const FrameworkPlanGiven& given, Plan& p,
                              Workload& w);

// Puts the framework's attention kernel curve into hw's efficiency (attention_*); returns the
// kernel used, or "" when the profile has none of the framework's kernels (its default kept).
std::string apply_attention_kernel(const FrameworkProfile& f, HardwareProfile& hw);

// The framework's kernel choice and compute efficiency applied to hw: the attention kernel as
// above, then the GEMM and attention asymptotes scaled by compute_efficiency.
std::string apply_framework_profile(const FrameworkProfile& f, HardwareProfile& hw);

}  // namespace dtplan
