#include "simulator/cost/reliability.h"

#include <algorithm>
#include <cmath>

#include "core/units.h"

namespace dtplan {

double job_mtbf_s(double mtbf_per_gpu_hours, int gpus) {
  return gpus > 0 ? mtbf_per_gpu_hours * 3600.0 / gpus : 0.0;
}

double young_interval_s(double checkpoint_s, double mtbf_s) {
  return std::sqrt(2.0 * checkpoint_s * mtbf_s);
}

double daly_interval_s(double checkpoint_s, double mtbf_s) {
  if (checkpoint_s >= 2.0 * mtbf_s) return mtbf_s;
  const double r = checkpoint_s / (2.0 * mtbf_s);
  return std::sqrt(2.0 * checkpoint_s * mtbf_s) * (1.0 + std::sqrt(r) / 3.0 + r / 9.0) -
         checkpoint_s;
}

double checkpoint_waste_fraction(double checkpoint_s, double interval_s, double restart_s,
                                 double mtbf_s) {
  return checkpoint_s / interval_s + (interval_s / 2.0 + restart_s) / mtbf_s;
}

CheckpointWriters checkpoint_writers_of_stack(const std::string& stack) {
  return stack == "deepspeed" ? CheckpointWriters::kDeepSpeed : CheckpointWriters::kEveryRank;
}

CheckpointCosts checkpoint_costs(const ModelSpec& m, const Cluster& c, const Plan& p,
                                 CheckpointWriters who) {
  const ClusterServices sv = services_of(c);
  const HardwareProfile& hw = c.profile;
  CheckpointCosts k;
  k.who = who;
  const double params = static_cast<double>(count_params(m).total());
  // DeepSpeed's ZeRO-3 partitions the 16-bit weights out of the module's state dict ("they
  // aren't part of state_dict": stage3_gather_16bit_weights_on_model_save,
  // docs/_pages/config-json.md, deepspeedai/DeepSpeed@edaa7221); the fp32 partitions stand in.
  const bool ds = who == CheckpointWriters::kDeepSpeed;
  k.weights_bytes = ds && p.zero == 3 ? 0.0 : 2.0 * params;
  k.master_weights_bytes = 4.0 * params;
  k.optimizer_moments_bytes = 8.0 * params;
  k.size_bytes = k.weights_bytes + k.master_weights_bytes + k.optimizer_moments_bytes;
  // What the first replica writes alone: everything (legacy format; DeepSpeed without ZeRO,
  // whose optimizer state rides in the model-states file) or DeepSpeed's 16-bit weights (dp
  // rank 0 saves the model states: save_non_zero_checkpoint, is_data_parallel_writer; every
  // rank of the optimizer's group its zero_pp_rank shard: save_zero_checkpoint,
  // deepspeed/runtime/engine.py _configure_checkpointing, deepspeedai/DeepSpeed@edaa7221).
  // The rest is split over every rank (Megatron dist_checkpointing's
  // FullyParallelSaveStrategyWrapper; FSDP and ZeRO shards are that size by construction).
  if (who == CheckpointWriters::kFirstReplica || (ds && p.zero == 0))
    k.first_replica_bytes = k.size_bytes;
  else if (ds)
    k.first_replica_bytes = k.weights_bytes;
  const double shared_bytes = k.size_bytes - k.first_replica_bytes;
  const int gpn = std::max(1, std::min(c.num_gpus, hw.node.gpus_per_node));
  const int ranks = std::max(1, c.num_gpus);
  // The first replica's ranks: its tp x cp block of each stage (adjacent in the rank order).
  const int first = std::max(1, std::min(ranks, p.tp * p.cp * p.pp));
  const int first_per_node = std::max(1, std::min(gpn, p.tp * p.cp));
  const double shared_shard = shared_bytes / ranks;
  const double first_shard = k.first_replica_bytes > 0 ? k.first_replica_bytes / first : 0.0;
  if (k.first_replica_bytes > 0) k.first_replica_writers = first;
  k.writers = shared_bytes > 0 ? ranks : first;
  const int per_node = shared_bytes > 0 ? gpn : first_per_node;
  k.per_rank_bytes = first_shard + shared_shard;
  k.per_node_bytes = first_per_node * first_shard + gpn * shared_shard;
  k.writers_per_node = per_node;
  // Every writing rank stages its shard at once: writers behind one PCIe uplink share it.
  const double pcie = hw.host.pcie_gbps_per_gpu > 0 ? hw.host.gbps_per_gpu_when(per_node) : 16.0;
  k.d2h_s = k.per_rank_bytes / (pcie * units::kGBps);
  const StorageSpec& st = sv.storage;
  const double node_write = k.per_node_bytes / (st.write_gbps_per_node * units::kGBps);
  const double fs_write =
      st.aggregate_write_gbps > 0 ? k.size_bytes / (st.aggregate_write_gbps * units::kGBps) : 0;
  k.storage_write_s = std::max(node_write, fs_write);
  k.file_system_bound = fs_write > node_write;
  k.write_s_sync = k.d2h_s + k.storage_write_s;
  k.write_s_async_blocking = k.d2h_s;
  const double node_read = k.per_node_bytes / (st.read_gbps_per_node * units::kGBps);
  const double fs_read =
      st.aggregate_read_gbps > 0 ? k.size_bytes / (st.aggregate_read_gbps * units::kGBps) : 0;
  k.load_s = std::max(node_read, fs_read) + k.d2h_s;
  return k;
}

const char* checkpoint_writers_text(const CheckpointCosts& k) {
  if (k.first_replica_bytes <= 0) return "every rank writes an equal shard (fully parallel save)";
  if (k.first_replica_bytes < k.size_bytes)
    return "DeepSpeed: data-parallel rank 0 writes the 16-bit weights, every rank its ZeRO "
           "optimizer shard";
  return k.who == CheckpointWriters::kDeepSpeed
             ? "DeepSpeed without ZeRO: data-parallel rank 0 writes model and optimizer states"
             : "the first data-parallel replica writes it";
}

FailureCosts failure_costs(const ModelSpec& m, const Cluster& c, const Plan& p, double step_time_s,
                           const FailureOptions& o) {
  const ClusterServices sv = services_of(c);
  FailureCosts f;
  f.checkpoint = checkpoint_costs(m, c, p, o.writers);
  const RestartSpec& r = sv.restart;
  f.restart.detection_s = r.detection_s;
  f.restart.requeue_s = r.requeue_s;
  f.restart.init_s = r.init_base_s + r.init_per_1k_ranks_s * c.num_gpus / 1000.0;
  f.restart.load_s = f.checkpoint.load_s;
  f.restart.fast_forward_s = r.fast_forward_s;
  f.restart_s = o.restart_s.value_or(f.restart.total_s());
  f.restart_given = o.restart_s.has_value();
  f.async_save = o.async_save;
  f.checkpoint_blocking_s =
      o.async_save ? f.checkpoint.write_s_async_blocking : f.checkpoint.write_s_sync;
  f.job_mtbf_s = job_mtbf_s(sv.reliability.mtbf_per_gpu_hours, c.num_gpus);
  const double delta = std::max(f.checkpoint_blocking_s, 1e-9);
  f.young_interval_s = young_interval_s(delta, f.job_mtbf_s);
  f.daly_interval_s = daly_interval_s(delta, f.job_mtbf_s);
  f.interval_s = o.interval_s.value_or(f.young_interval_s);
  // An asynchronous save must finish writing before the next one starts.
  if (o.async_save && f.interval_s < f.checkpoint.storage_write_s) {
    f.interval_s = f.checkpoint.storage_write_s;
    f.interval_raised = true;
  }
  // A checkpoint is taken between steps (Megatron's --save-interval counts iterations, at least
  // one): an interval shorter than a step is one step.
  if (step_time_s > 0 && f.interval_s < step_time_s) {
    f.interval_s = step_time_s;
    f.interval_raised_to_step = true;
  }
  f.interval_s = std::max(f.interval_s, 1e-9);
  f.interval_steps = step_time_s > 0 ? f.interval_s / step_time_s : 0;
  f.checkpoint_fraction = f.checkpoint_blocking_s / f.interval_s;
  // Work lost to a failure: back to the last checkpoint that is complete. Saved synchronously,
  // that is the last one taken: tau/2 on average (Young). Saved asynchronously, a checkpoint
  // taken at t is complete only at t + W (its storage write), so a failure in [t, t + W) falls
  // back to the one before: E[lost] = (1/tau)(integral_0^tau x dx + integral_0^W tau dx) =
  // tau/2 + W, with W <= tau (the interval is raised to the write above) [derived].
  f.rework_fraction =
      (f.interval_s / 2.0 + (o.async_save ? f.checkpoint.storage_write_s : 0.0)) / f.job_mtbf_s;
  f.restart_fraction = f.restart_s / f.job_mtbf_s;
  f.skipped_fraction = std::clamp(o.skipped_step_fraction, 0.0, 1.0);
  f.lost_fraction = std::min(
      1.0, f.checkpoint_fraction + f.rework_fraction + f.restart_fraction + f.skipped_fraction);
  f.goodput = 1.0 - f.lost_fraction;
  return f;
}

}  // namespace dtplan
