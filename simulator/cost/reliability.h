// Checkpointing and failures: job MTBF from a per-GPU MTBF, the optimal checkpoint interval
// (Young 1974 first order; Daly 2006 higher order), and the share of time they waste
// (REFERENCE.md §6). Pure functions; seconds unless named otherwise.
#pragma once

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

}  // namespace dtplan
