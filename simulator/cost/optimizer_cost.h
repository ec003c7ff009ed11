// The optimizer step of one GPU: Adam over the parameters it updates, memory-bound.
//
// Contract: pure functions.
#pragma once

#include "core/hardware.h"
#include "core/plan.h"
#include "simulator/cost/memory_model.h"

namespace dtplan {

// Kernel launches of one optimizer step that no parameter count changes (multi-tensor Adam,
// gradient-norm, zeroing, loss-scale checks): the step's fixed host time is this many dispatches.
inline constexpr int kOptimizerStepLaunches = 20;

// The fixed host time of an optimizer step: a floor under optimizer_step_s for any plan.
double optimizer_host_floor_s(const HardwareProfile& hw);

// Adam reads the fp32 gradient (4 bytes), reads and writes the fp32 master weight and both
// moments (24), writes the 16-bit weight (2) and runs a gradient-norm pass (4): 34 bytes per
// parameter the rank updates (all of its own with ZeRO 0, a 1/dp shard from ZeRO-1 on),
// plus the fixed host time. FP8 training adds, once per step, the quantization of the rank's
// linear weights into their FP8 copies (Megatron-Core passes is_first_microbatch to Transformer
// Engine, which re-quantizes the cached copies on the step's first micro-batch only:
// megatron/core/extensions/transformer_engine.py @d98e8a6, TE pytorch/module/base.py:861-890).
double optimizer_step_s(const HardwareProfile& hw, const Workload& w, const Plan& p,
                        const ParamsOnRank& prm);

}  // namespace dtplan
