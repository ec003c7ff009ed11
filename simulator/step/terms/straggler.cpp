// Stragglers in closed form: a fraction f of the GPUs runs its kernels X times slower at any
// one step. A synchronous step runs at its slowest rank's pace (TP and CP groups synchronise
// every layer, pipeline stages every micro-batch, data-parallel replicas at the gradient
// reduction), so with N GPUs the step has a straggler with probability P = 1 - (1 - f)^N, and
// then its stage's work takes X times longer. The closed form charges the busiest stage's
// case, P (X - 1) (compute + recompute): exact when the straggler is on the busiest stage (a
// 1F1B pipeline's last stage: `simulate --slow-gpu` shows m (X - 1) t there), an upper bound
// elsewhere, where other stages' slack absorbs part of it (docs/simulator.md).
#include <cmath>

#include "core/registry.h"
#include "simulator/step/step_terms.h"

namespace dtplan {
namespace {

class Straggler final : public IStepTerm {
 public:
  const char* key() const override { return "straggler_s"; }
  const char* label() const override { return "stragglers"; }
  double seconds(const ModelSpec&, const Cluster& c, const Workload&, const Plan&,
                 const Estimate& e) const override {
    if (!c.services) return 0;
    const StragglerSpec& s = c.services->stragglers;
    if (!(s.fraction > 0) || !(s.factor > 1)) return 0;
    const double p_any = 1.0 - std::pow(1.0 - s.fraction, static_cast<double>(c.num_gpus));
    return p_any * (s.factor - 1.0) * (e.compute_s + e.recompute_s);
  }
};

}  // namespace
DTPLAN_REGISTER(IStepTerm, Straggler, "straggler",
                "a fraction of slow GPUs: P(any in the job) x (factor - 1) x busiest compute")
}  // namespace dtplan
