// Plug-in point for the search: what turns one plan into an Estimate. The search never knows
// which evaluator it holds (analytic now; the discrete-event simulator re-ranks the top K later).
//
// Contract: evaluate() is const and thread-safe (called from every search thread at once);
// the plan has passed validation.
#pragma once

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

class IEvaluator {
 public:
  virtual ~IEvaluator() = default;
  virtual const char* name() const = 0;
  virtual Estimate evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                            const Plan& p) const = 0;
};

// The closed-form estimator (simulator/analytic).
class AnalyticEvaluator final : public IEvaluator {
 public:
  const char* name() const override { return "analytic"; }
  Estimate evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                    const Plan& p) const override;
};

// The discrete-event simulator (simulator/des): the schedule's timeline instead of the closed
// form; plans whose schedule it does not order are estimated in closed form.
class DesEvaluator final : public IEvaluator {
 public:
  const char* name() const override { return "des"; }
  Estimate evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                    const Plan& p) const override;
};

}  // namespace dtplan
