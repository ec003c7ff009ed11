// Checkpointing and failures: job MTBF from a per-GPU MTBF, the optimal checkpoint interval
// (Young 1974 first order; Daly 2006 higher order), and the share of time they waste
// (REFERENCE.md §6). Pure functions; seconds unless named otherwise.
#pragma once

#include <optional>

#include "core/hardware.h"
#include "core/model_spec.h"

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

// Checkpoints and failures of a job: what the what-if studies and reports show.
struct FailureCosts {
  double checkpoint_bytes = 0;       // one full checkpoint
  double checkpoint_s = 0;           // a synchronous write by every node in parallel
  double restart_s = 0;              // given, else the checkpoint's read-back (its write time)
  double job_mtbf_s = 0;             // n GPUs failing independently
  double checkpoint_interval_s = 0;  // Young's optimum
  double lost_fraction = 0;          // first-order waste, at most 1
};

// A checkpoint holds the 16-bit weights and the fp32 optimizer state (master weights, Adam m
// and v): 2 + 12 bytes per parameter, written by every node at the profile's
// checkpoint_write_gbps_per_node. nullopt when the profile has no MTBF or checkpoint bandwidth.
std::optional<FailureCosts> failure_costs(const ModelSpec& m, const Cluster& c,
                                          std::optional<double> restart_s);

}  // namespace dtplan
