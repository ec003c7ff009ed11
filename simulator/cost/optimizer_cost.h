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
// plus the fixed host time.
double optimizer_step_s(const HardwareProfile& hw, Precision precision, const Plan& p,
                        const ParamsOnRank& prm);

}  // namespace dtplan
