#include "planner/i_evaluator.h"
#include "simulator/analytic/estimator.h"
#include "simulator/des/step_sim.h"

namespace dtplan {

Estimate AnalyticEvaluator::evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                                     const Plan& p) const {
  // One layer-cost cache per thread: search threads share this evaluator.
  thread_local EstimatorCache cache;
  return estimate(m, c, w, p, {}, &cache);
}

Estimate DesEvaluator::evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                                const Plan& p) const {
  if (p.pp > 1 && !des::simulator_supports(p.schedule)) return estimate(m, c, w, p);
  return des::simulate_step(m, c, w, p).estimate;
}

}  // namespace dtplan
