// Checkpoints and failures (REFERENCE.md §6): what a checkpoint holds and how long writing and
// reading it take against the cluster's storage, the job's MTBF, the Young and Daly intervals,
// a restart built from its parts, and the share of time all of it costs (goodput). Pure
// functions; seconds unless named otherwise. docs/resilience.md shows the arithmetic.
#pragma once

#include <optional>
#include <string>

#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

// Job mean time between failures for n GPUs failing independently.
double job_mtbf_s(double mtbf_per_gpu_hours, int gpus);

// Young: sqrt(2 delta M).
double young_interval_s(double checkpoint_s, double mtbf_s);

// Daly: sqrt(2 delta M) [1 + sqrt(delta/2M)/3 + (delta/2M)/9] - delta for delta < 2M, else M.
double daly_interval_s(double checkpoint_s, double mtbf_s);

// First-order waste: delta/tau + (tau/2 + restart)/M.
double checkpoint_waste_fraction(double checkpoint_s, double interval_s, double restart_s,
                                 double mtbf_s);

// Who writes a checkpoint's parts: the framework's checkpoint code (docs/resilience.md).
enum class CheckpointWriters {
  // Every rank an equal shard of everything: Megatron's distributed checkpoint (torch_dist with
  // the fully parallel save, the default), FSDP and torchtitan's DCP.
  kEveryRank,
  // The first data-parallel replica writes everything, tp x cp x pp ranks: Megatron's legacy
  // `torch` format.
  kFirstReplica,
  // DeepSpeed's default engine: data-parallel rank 0 writes the module's 16-bit weights
  // (mp_rank_*_model_states.pt; none under ZeRO-3, whose weights are partitioned out of the
  // state dict) and, with ZeRO >= 1, every rank its shard of the fp32 master weights and
  // moments (zero_pp_rank_*_optim_states.pt); without ZeRO the optimizer state rides in the
  // model-states file.
  kDeepSpeed,
};
// The writers of a framework stack ("megatron", "deepspeed", "torchtitan", "other"): DeepSpeed's
// for "deepspeed", every rank's otherwise.
CheckpointWriters checkpoint_writers_of_stack(const std::string& stack);

// One checkpoint of a plan: the 16-bit weights (2 B per parameter), the fp32 master weights
// (4 B) and Adam's two fp32 moments (8 B), written by the ranks `CheckpointWriters` says.
struct CheckpointCosts {
  double weights_bytes = 0, master_weights_bytes = 0, optimizer_moments_bytes = 0;
  double size_bytes = 0;
  // The part only the first data-parallel replica writes (split over its tp x cp x pp ranks);
  // the rest is split over every rank.
  double first_replica_bytes = 0;
  int first_replica_writers = 0;      // tp x cp x pp, where first_replica_bytes > 0
  int writers = 0;                    // ranks that write anything
  int writers_per_node = 1;           // of those, on one node (sharing its PCIe uplinks)
  double per_rank_bytes = 0;          // the largest shard (a first-replica rank's)
  double per_node_bytes = 0;          // what the busiest node writes
  double d2h_s = 0;                   // that shard from GPU to pinned host memory (PCIe)
  double storage_write_s = 0;         // every node's shards onto storage, in parallel
  bool file_system_bound = false;     // the aggregate, not a node's link, sets storage_write_s
  double write_s_sync = 0;            // blocks training: copy, then write
  double write_s_async_blocking = 0;  // blocks training: the copy (Megatron --async-save)
  double load_s = 0;                  // read back at a restart, then host to GPU
  CheckpointWriters who = CheckpointWriters::kEveryRank;
};

CheckpointCosts checkpoint_costs(const ModelSpec& m, const Cluster& c, const Plan& p,
                                 CheckpointWriters who = CheckpointWriters::kEveryRank);
// Who wrote it, in words (text and JSON outputs).
const char* checkpoint_writers_text(const CheckpointCosts& k);

// A restart after a failure, from its parts (defaults in core/cluster_services.cpp).
struct RestartCosts {
  double detection_s = 0, requeue_s = 0, init_s = 0, load_s = 0, fast_forward_s = 0;
  double total_s() const { return detection_s + requeue_s + init_s + load_s + fast_forward_s; }
};

struct FailureOptions {
  bool async_save = false;  // checkpoints block only for the device-to-host copy
  CheckpointWriters writers = CheckpointWriters::kEveryRank;  // set from the framework's stack
  std::optional<double> restart_s;   // the whole restart, instead of its parts
  std::optional<double> interval_s;  // checkpoint every this many seconds, not Young's
  double skipped_step_fraction = 0;  // steps lost to fp16 overflow (goodput term)
};

struct FailureCosts {
  CheckpointCosts checkpoint;
  RestartCosts restart;
  bool async_save = false;
  double checkpoint_blocking_s = 0;  // delta: what one checkpoint costs the training loop
  double job_mtbf_s = 0;
  double young_interval_s = 0, daly_interval_s = 0;
  double interval_s = 0;                 // the one applied (Young's, or given; async: >= the write)
  double interval_steps = 0;             // interval_s / step time
  bool interval_raised = false;          // async: the interval was raised to the storage write time
  bool interval_raised_to_step = false;  // the interval was shorter than one step
  bool restart_given = false;            // restart_s was given, not built from its parts
  double restart_s = 0;                  // restart.total_s(), or given
  // Shares of wall time: checkpoint writes delta/tau, lost work tau/(2M), restarts R/M, fp16
  // skipped steps; goodput = 1 - their sum (>= 0).
  double checkpoint_fraction = 0, rework_fraction = 0, restart_fraction = 0, skipped_fraction = 0;
  double lost_fraction = 0;
  double goodput = 1;
};

// step_time_s converts the interval into steps; it does not change the fractions.
FailureCosts failure_costs(const ModelSpec& m, const Cluster& c, const Plan& p, double step_time_s,
                           const FailureOptions& o = {});

}  // namespace dtplan
