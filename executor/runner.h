// Runs a plan's step on real devices through an executor backend, one process per GPU, and
// puts measured beside predicted: step time (barrier to barrier), peak memory (what the rank
// really held, beside the memory model's figure) and time per op class (beside the cost
// model's time for the same instructions). A watchdog ends a rank whose instruction does not
// finish within the timeout, naming the instruction, its group and the group's ranks.
#pragma once

#include <string>
#include <vector>

#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "executor/rank_program.h"

namespace dtplan::calibrate {
class ProcessGroup;
}

namespace dtplan::exec {

struct ExecOptions {
  std::string backend = "cpu";
  int scale = 0;  // 0: the backend's default
  int steps = 2;  // timed steps (the first is a warm-up and is reported apart)
  double timeout_s = 300;
  bool empty_ops = false;  // orchestration only: every op skipped (executor overhead)
  std::string op_log_dir;  // where each rank writes its executed op log ("" = none)
  // The plan's ranks this run holds, one process each (empty: all of them). Collectives and
  // transfers with a peer outside become waits of the model's time (Instr::modelled).
  std::vector<int> ranks;
};

struct ClassTimes {
  double measured_s[kNumOpClasses] = {};
  double predicted_s[kNumOpClasses] = {};
  int count[kNumOpClasses] = {};
};

// One GEMM shape's calls in a step (per GPU after sharding; `count` copies per call).
struct GemmShapeTimes {
  int64_t m = 0, n = 0, k = 0;
  int count = 1;
  Precision precision = Precision::kBf16;  // what the backend ran it in
  int calls = 0;
  double measured_s = 0, predicted_s = 0;  // summed over the calls
};

// One collective's calls in a step: operation, group, nccl-tests size.
struct CollectiveShapeTimes {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int group_size = 1;
  bool crosses_nodes = false;
  double bytes = 0;
  int calls = 0;
  double measured_s = 0, predicted_s = 0;  // summed over the calls
};

struct RankResult {
  int rank = 0, stage = 0;  // the plan's rank this process held, its pipeline stage
  int modelled_ops = 0;     // collectives and transfers waited for (a peer outside the run)
  double modelled_s = 0;    // their time in the last step
  std::string host;
  std::vector<double> step_s;                           // barrier to barrier, every step
  double peak_bytes = 0;                                // what the executor held at its peak
  double predicted_peak_bytes = 0;                      // the memory model's figure for this stage
  double device_peak_bytes = 0;                         // what the device reports (0: no figure)
  ClassTimes classes;                                   // the last step
  std::vector<GemmShapeTimes> gemm_shapes;              // the last step, by shape
  std::vector<CollectiveShapeTimes> collective_shapes;  // the last step
  int instructions = 0;
};

struct ExecResult {
  std::string backend, device, software;
  std::vector<std::string> notes;
  ModelSpec model;  // what ran (scaled)
  int scale = 1;
  int ranks = 0;                            // processes that ran
  int plan_ranks = 0;                       // the plan's GPUs
  std::vector<RankResult> per_rank;         // rank 0 only: every rank's
  std::vector<GemmShapeTimes> gemm_shapes;  // summed over ranks, largest measured time first
  std::vector<CollectiveShapeTimes> collective_shapes;  // summed over ranks
  double measured_step_s = 0;                           // the last step, slowest rank
  double measured_peak_bytes = 0;                       // the largest rank's
  double predicted_step_s = 0;  // the closed-form estimate of the same (scaled) plan
  double predicted_peak_bytes = 0;
  double predicted_step_sim_s = 0;  // the discrete-event simulation of it
};

// Runs `options.steps` steps of the plan on the ranks of `world` (its size must be the plan's
// GPU count). Collective: every rank calls it; rank 0's result holds every rank's figures.
// Throws InputError for an impossible request; a hang ends the job through the watchdog (exit 3).
ExecResult execute(const ModelSpec& model, const Cluster& c, const Workload& w, const Plan& p,
                   const ExecOptions& options, const calibrate::ProcessGroup& world);

// Folds a run's measured GEMM and collective times into a calibrated profile, as the calibrator
// writes one (its fits, tables and provenance; calibrate/output.h): `base_path` is the profile
// the run was predicted with. Writes `out` atomically after checking that it loads. Throws
// InputError (naming --update-profile) when the measurements do not fit.
void write_updated_profile(const ExecResult& r, const std::string& base_path,
                           const HardwareProfile& base, const std::string& out);

// The backend names registered (`dtplan list executors`).
std::vector<std::string> executor_backends();

}  // namespace dtplan::exec
