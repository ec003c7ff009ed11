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

CheckpointCosts checkpoint_costs(const ModelSpec& m, const Cluster& c, const Plan& p,
                                 bool parallel_save) {
  const ClusterServices sv = services_of(c);
  const HardwareProfile& hw = c.profile;
  CheckpointCosts k;
  const double params = static_cast<double>(count_params(m).total());
  k.weights_bytes = 2.0 * params;
  k.master_weights_bytes = 4.0 * params;
  k.optimizer_moments_bytes = 8.0 * params;
  k.size_bytes = k.weights_bytes + k.master_weights_bytes + k.optimizer_moments_bytes;
  // Fully parallel save: the replicas of a model-parallel shard split its writing, so every
  // rank writes size / ranks (Megatron dist_checkpointing FullyParallelSaveStrategyWrapper;
  // FSDP and ZeRO-3 shards are that size by construction).
  const int gpn = std::max(1, std::min(c.num_gpus, hw.node.gpus_per_node));
  int per_node = gpn;
  k.writers = std::max(1, c.num_gpus);
  if (!parallel_save) {
    // The first replica's ranks: its tp x cp block of each stage (adjacent in the rank order).
    k.writers = std::max(1, std::min(c.num_gpus, p.tp * p.cp * p.pp));
    per_node = std::max(1, std::min(gpn, p.tp * p.cp));
  }
  k.per_rank_bytes = k.size_bytes / k.writers;
  k.per_node_bytes = k.per_rank_bytes * per_node;
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

FailureCosts failure_costs(const ModelSpec& m, const Cluster& c, const Plan& p, double step_time_s,
                           const FailureOptions& o) {
  const ClusterServices sv = services_of(c);
  FailureCosts f;
  f.checkpoint = checkpoint_costs(m, c, p, o.parallel_save);
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
