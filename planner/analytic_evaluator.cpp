#include "planner/i_evaluator.h"
#include "simulator/analytic/estimator.h"

namespace dtplan {

Estimate AnalyticEvaluator::evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                                     const Plan& p) const {
  return estimate(m, c, w, p);
}

}  // namespace dtplan
