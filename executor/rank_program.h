// What one rank of a plan executes in one training step, in order: the op program's ops for
// every task of the rank's pipeline schedule (forward, backward, weight gradients and
// recomputation of each micro-batch and chunk, layer by layer), the pipeline receives and
// sends around them, the activation memory each (micro-batch, chunk) holds from its forward to
// its backward, and the step's end (gradient reduction, optimizer, parameter gather). Each
// instruction carries the cost model's time for it, so a run can put measured beside
// predicted per op class. The same list is the op log a test checks against the schedule.
#pragma once

#include <string>
#include <vector>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "executor/rank_grid.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/workload/op.h"

namespace dtplan::exec {

enum class InstrKind : uint8_t {
  kCompute,     // a GEMM, attention or element-wise op of the op program
  kCollective,  // a collective in one of the rank's groups
  kSend,        // pipeline send (non-blocking; completed by the step's end)
  kRecv,        // pipeline receive (blocking, before the task that needs it)
  kAlloc,       // memory comes to life: a (micro-batch, chunk)'s activations (layer -1), the
                // loss's scratch (layer -2), a recomputed layer's activations (its layer)
  kFree,        // ... and is released (after the backward that needs it)
};

// The op classes measured and predicted side by side.
enum class OpClass : uint8_t {
  kGemm,
  kAttention,
  kElementwise,
  kTp,
  kCp,
  kEp,
  kPp,
  kDp,
  kOptimizer,
};
inline constexpr int kNumOpClasses = 9;
const char* to_string(OpClass c);

struct Instr {
  InstrKind kind = InstrKind::kCompute;
  OpClass op_class = OpClass::kElementwise;
  Op op;  // compute or collective: the op program's op (sizes per GPU)
  // The schedule task it belongs to (-1: the step's end), and the layer (-1: none).
  int task = -1;
  ScheduleTask::Pass pass = ScheduleTask::kF;
  int mb = -1, chunk = -1, layer = -1;
  bool recompute = false;
  GroupKind group = GroupKind::kTp;  // collectives
  int peer = -1;                     // send/recv: the world rank on the other side
  int tag = 0;                       // send/recv: unique per (direction, micro-batch, chunk)
  double bytes = 0;                  // send/recv/alloc/free
  double predicted_s = 0;
  // A collective or transfer with a peer outside the ranks a run holds (ExecOptions::ranks):
  // the run waits the model's time instead of running it.
  bool modelled = false;
  std::string label() const;  // "F mb0 c1 L5 qkv_proj" for logs and errors
};

struct RankProgram {
  int rank = 0;
  int stage = 0;  // pipeline rank
  std::vector<ScheduleTask> order;
  std::vector<Instr> instrs;
  StageMemory predicted_memory;           // the memory model's figure for this stage
  double activation_bytes_per_layer = 0;  // one micro-batch, one (dense) layer
  double static_bytes() const {
    return predicted_memory.weights_bytes + predicted_memory.grads_bytes +
           predicted_memory.optimizer_bytes + predicted_memory.buffers_bytes;
  }
};

// The program of world rank `rank`. Throws InputError for a plan the executor cannot run.
RankProgram build_rank_program(const ModelSpec& m, const Workload& w, const Plan& p,
                               const Cluster& c, const RankGrid& grid, int rank);

// The model with hidden, FFN widths, heads and vocabulary divided by `factor` (head width
// kept; heads stay a multiple of TP x CP), for backends that run at reduced shapes; the plan must
// still divide it (InputError naming --scale otherwise). factor 1 returns the model unchanged.
ModelSpec scale_model(const ModelSpec& m, const Plan& p, int factor);

}  // namespace dtplan::exec
