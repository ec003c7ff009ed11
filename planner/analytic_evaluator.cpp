#include "planner/i_evaluator.h"
#include "simulator/analytic/estimator.h"
#include "simulator/des/step_sim.h"

namespace dtplan {

namespace {
// One layer-cost cache per thread: search threads share an evaluator.
EstimatorCache& thread_cache() {
  thread_local EstimatorCache cache;
  return cache;
}
}  // namespace

Estimate AnalyticEvaluator::evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                                     const Plan& p) const {
  return estimate(m, c, w, p, {}, &thread_cache());
}

std::optional<double> AnalyticEvaluator::peak_memory(const ModelSpec& m, const Cluster& c,
                                                     const Workload& w, const Plan& p) const {
  return peak_memory_bytes(m, c, w, p, &thread_cache());
}

double AnalyticEvaluator::step_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w,
                                          const Plan& p) const {
  return dtplan::step_time_floor(m, c, w, p, &thread_cache());
}

double AnalyticEvaluator::zero_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w,
                                          const Plan& p) const {
  return dtplan::zero_time_floor(m, c, w, p, &thread_cache());
}

double AnalyticEvaluator::microbatch_time_floor(const ModelSpec& m, const Cluster& c,
                                                const Workload& w, const Plan& p) const {
  return dtplan::microbatch_time_floor(m, c, w, p, &thread_cache());
}

Estimate DesEvaluator::evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                                const Plan& p) const {
  if (p.pp > 1 && !des::simulator_supports(p.schedule)) return estimate(m, c, w, p);
  des::SimOptions o;
  o.cache = &thread_cache();  // the same step costs the closed form computed for this plan
  return des::simulate_step(m, c, w, p, o).estimate;
}

std::optional<double> DesEvaluator::peak_memory(const ModelSpec& m, const Cluster& c,
                                                const Workload& w, const Plan& p) const {
  return peak_memory_bytes(m, c, w, p, &thread_cache());
}

}  // namespace dtplan
