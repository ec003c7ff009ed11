// Results of evaluating one plan: the step-time breakdown, throughput, FLOP utilization and
// per-stage memory. Plain data: reports and the planner read it without seeing the cost model.
#pragma once

#include <array>

#include "core/units.h"

namespace dtplan {

inline constexpr int kCommDims = 5;  // tp, cp, ep, pp, dp (order of CommDim)
inline constexpr const char* kCommDimNames[kCommDims] = {"tp", "cp", "ep", "pp", "dp"};

struct StageMemory {
  double weights_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double buffers_bytes = 0;  // CUDA context, NCCL, ZeRO-3 gathered parameters, logits scratch
  int layers = 0;
  double total_bytes() const {
    return weights_bytes + grads_bytes + optimizer_bytes + activations_bytes + buffers_bytes;
  }
};

// One term of the step-time breakdown as data: its key under "breakdown" in JSON (a dot nests
// it: "exposed_comm_s.tp"), its label in text and reports, and its seconds. The list of an
// estimate's terms is step_terms() (simulator/step/step_terms.h): the core terms below, then
// those of the registered step-term plug-ins; it sums to the step time.
struct StepTermValue {
  const char* key;
  const char* label;
  double seconds;
  bool always_shown;  // shown in text even when zero (compute, optimizer)
};
// Plug-in step terms an estimate can hold (extra_terms_s, in registry order).
inline constexpr int kMaxExtraStepTerms = 8;

struct Estimate {
  double step_time_s = 0;
  // Breakdown (sums to step_time_s): busiest pipeline rank's compute over the step, its
  // recomputation, exposed communication per dimension, the pipeline bubble, the optimizer
  // step and fixed per-step framework overhead.
  double compute_s = 0;
  double recompute_s = 0;
  std::array<double, kCommDims> exposed_comm_s{};
  double bubble_s = 0;
  double optimizer_s = 0;
  double overhead_s = 0;
  // Seconds of each registered step-term plug-in (checkpoint stall, data stall, ...), in the
  // order of their registry; included in step_time_s.
  std::array<double, kMaxExtraStepTerms> extra_terms_s{};
  // Communication per GPU per step (bytes each rank sends) and its total time, hidden or not.
  std::array<double, kCommDims> comm_volume_bytes{};
  std::array<double, kCommDims> comm_time_s{};

  double model_flops = 0;     // per step, whole job (Megatron num_floating_point_operations)
  double hardware_flops = 0;  // model FLOPs plus recomputation
  double mfu = 0;
  double hfu = 0;
  double model_tflops_per_gpu = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double time_to_train_days = 0;  // 0 when no training-token count was given
  double bubble_fraction = 0;     // bubble_s / step_time_s
  double comm_share = 0;          // exposed communication / step_time_s

  int microbatches = 0;
  // Memory of the first, last and most-loaded pipeline stages (per GPU).
  StageMemory memory_first, memory_last, memory_peak;
  int peak_stage = 0;
  int busiest_stage = 0;  // the pipeline rank with the most work, whose time the breakdown shows
  // The pipeline rank whose data-parallel communication the step waits for (the largest
  // exposed part): the DP figures of comm_volume_bytes and comm_time_s are that rank's.
  int dp_stage = 0;
  double memory_capacity_bytes = 0;
  bool fits = false;

  double exposed_comm_total_s() const {
    double t = 0;
    for (double x : exposed_comm_s) t += x;
    return t;
  }
};

}  // namespace dtplan
