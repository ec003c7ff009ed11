#include "simulator/cost/optimizer_cost.h"

#include <algorithm>

#include "simulator/cost/compute_cost.h"
#include "simulator/workload/op_program.h"

namespace dtplan {

double optimizer_host_floor_s(const HardwareProfile& hw) {
  return kOptimizerStepLaunches * hw.efficiency.host_dispatch_us * 1e-6;
}

double optimizer_step_s(const HardwareProfile& hw, const Workload& w, const Plan& p,
                        const ParamsOnRank& prm) {
  const double params =
      p.zero >= 1 ? prm.dense / std::max(1, p.dp * p.cp) + prm.expert / std::max(1, p.edp())
                  : prm.total();
  const ComputeCostModel cm{&hw, w.precision, w.fp8_recipe};
  double t = cm.memory_s(params * 34.0) + optimizer_host_floor_s(hw);
  if (w.precision == Precision::kFp8)
    t += cm.memory_s(prm.linear * fp8_quantize_bytes_per_element(
                                      w.fp8_recipe, hw.gpu.fp8_non_tn_gemm, Fp8Tensor::kWeight));
  return t;
}

}  // namespace dtplan
