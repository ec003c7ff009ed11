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
  // FP8 weights, cast once per step after the update. With ZeRO 0-2 every rank holds, and
  // casts, its whole model-parallel share of the linear weights (Transformer Engine caches the
  // FP8 copy over the micro-batches). With ZeRO-3 / FSDP a rank holds only its shard, which it
  // casts before the FP8 all-gather: Megatron-Bridge's FP8 recipes set fp8_param_gather
  // (src/megatron/bridge/training/mixed_precision.py:302 @067f987, the current-scaling recipe
  // its Megatron-FSDP perf recipes use), torchao's FSDP2 float8 all-gather casts the shard
  // (precompute_float8_dynamic_scale_for_fsdp). A stack that gathers 16-bit weights and casts
  // them every micro-batch (llm-foundry's FSDP1 with Transformer Engine) casts more than this.
  // (2026-12-07: a 405B plan at TP4 ZeRO-3 on 2048 H100 spent 0.15 s here on weights it does
  // not hold, against 0.003 s in BF16; found by a new-user trial.)
  if (w.precision == Precision::kFp8) {
    const double linear =
        p.zero == 3 && prm.total() > 0 ? prm.linear * params / prm.total() : prm.linear;
    t += cm.memory_s(linear * fp8_quantize_bytes_per_element(w.fp8_recipe, hw.gpu.fp8_non_tn_gemm,
                                                             Fp8Tensor::kWeight));
  }
  return t;
}

}  // namespace dtplan
