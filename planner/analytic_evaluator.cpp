#include "planner/i_evaluator.h"
#include "simulator/analytic/estimator.h"

namespace dtplan {

Estimate AnalyticEvaluator::evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                                     const Plan& p) const {
  // One layer-cost cache per thread: search threads share this evaluator.
  thread_local EstimatorCache cache;
  return estimate(m, c, w, p, {}, &cache);
}

}  // namespace dtplan
