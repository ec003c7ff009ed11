// FLOP counts per training step.
//
// model_flops follows Megatron-LM training.py::num_floating_point_operations (REFERENCE.md
// §1.1): every GEMM counted three times (forward, weight gradient, input gradient) at 2 FLOPs
// per multiply-add; core attention 12 c_mask q L B s^2 with c_mask = 1/2 (causal convention of
// Megatron HEAD since 2026-01) or 1 (the papers' convention, Megatron before 2026-01). Routers,
// norms and element-wise ops are not counted.
#pragma once

#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

enum class FlopsConvention { kCausalHalf, kFullAttention };
const char* describe(FlopsConvention c);

struct StepFlops {
  double model = 0;      // per step, whole job
  double recompute = 0;  // extra forward work from activation recomputation
};

StepFlops step_flops(const ModelSpec& m, const Workload& w, const Plan& p, FlopsConvention c);
StepFlops step_flops(const ModelSpec& m, const ParamCounts& counts, const Workload& w,
                     const Plan& p, FlopsConvention c);

}  // namespace dtplan
