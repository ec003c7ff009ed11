#include "simulator/cost/optimizer_cost.h"

#include <algorithm>

#include "simulator/cost/compute_cost.h"

namespace dtplan {

double optimizer_host_floor_s(const HardwareProfile& hw) {
  return kOptimizerStepLaunches * hw.efficiency.host_dispatch_us * 1e-6;
}

double optimizer_step_s(const HardwareProfile& hw, Precision precision, const Plan& p,
                        const ParamsOnRank& prm) {
  const double params =
      p.zero >= 1 ? prm.dense / std::max(1, p.dp * p.cp) + prm.expert / std::max(1, p.edp())
                  : prm.total();
  return ComputeCostModel{&hw, precision}.memory_s(params * 34.0) + optimizer_host_floor_s(hw);
}

}  // namespace dtplan
