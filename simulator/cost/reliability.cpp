#include "simulator/cost/reliability.h"

#include <cmath>

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

}  // namespace dtplan
