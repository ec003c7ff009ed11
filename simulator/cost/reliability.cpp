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

std::optional<FailureCosts> failure_costs(const ModelSpec& m, const Cluster& c,
                                          std::optional<double> restart_s) {
  const HardwareProfile& hw = c.profile;
  if (!hw.mtbf_per_gpu_hours || !hw.checkpoint_write_gbps_per_node) return std::nullopt;
  FailureCosts f;
  f.checkpoint_bytes = 14.0 * static_cast<double>(count_params(m).total());
  f.checkpoint_s =
      f.checkpoint_bytes / (*hw.checkpoint_write_gbps_per_node * units::kGBps * c.nodes());
  f.restart_s = restart_s.value_or(f.checkpoint_s);
  f.job_mtbf_s = job_mtbf_s(*hw.mtbf_per_gpu_hours, c.num_gpus);
  f.checkpoint_interval_s = young_interval_s(f.checkpoint_s, f.job_mtbf_s);
  f.lost_fraction = std::min(1.0, checkpoint_waste_fraction(f.checkpoint_s, f.checkpoint_interval_s,
                                                            f.restart_s, f.job_mtbf_s));
  return f;
}

}  // namespace dtplan
