// Plug-in point for the search: what turns one plan into an Estimate. The search never knows
// which evaluator it holds (the closed form, or the discrete-event simulator: search --evaluator
// des, or re-ranking the top K with --refine).
//
// Contract: evaluate() is const and thread-safe (called from every search thread at once);
// the plan has passed validation.
#pragma once

#include <optional>

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

  // Optional, for pruning; an evaluator that cannot tell keeps these defaults and the search
  // evaluates every plan in full. Both must hold exactly for what evaluate() returns:
  // peak_memory(p) == evaluate(p).memory_peak.total_bytes(), cheaper than evaluate().
  virtual std::optional<double> peak_memory(const ModelSpec&, const Cluster&, const Workload&,
                                            const Plan&) const {
    return std::nullopt;
  }
  // step_time_floor(p) <= evaluate(q).step_time_s for every plan q that differs from p only in
  // its ZeRO stage (0: no floor known).
  virtual double step_time_floor(const ModelSpec&, const Cluster&, const Workload&,
                                 const Plan&) const {
    return 0;
  }
  // What p's own ZeRO stage adds at least: step_time_floor(p) + zero_time_floor(p) <=
  // evaluate(p).step_time_s (0: nothing known).
  virtual double zero_time_floor(const ModelSpec&, const Cluster&, const Workload&,
                                 const Plan&) const {
    return 0;
  }
  // microbatch_time_floor(p) * q.num_microbatches() <= evaluate(q).step_time_s for every plan q
  // that differs from p only in its global batch (0: no floor known). With it a search over
  // several global batches decides a whole batch range at once.
  virtual double microbatch_time_floor(const ModelSpec&, const Cluster&, const Workload&,
                                       const Plan&) const {
    return 0;
  }
};

// The closed-form estimator (simulator/analytic).
class AnalyticEvaluator final : public IEvaluator {
 public:
  const char* name() const override { return "analytic"; }
  Estimate evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                    const Plan& p) const override;
  std::optional<double> peak_memory(const ModelSpec& m, const Cluster& c, const Workload& w,
                                    const Plan& p) const override;
  double step_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w,
                         const Plan& p) const override;
  double zero_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w,
                         const Plan& p) const override;
  double microbatch_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w,
                               const Plan& p) const override;
};

// The discrete-event simulator (simulator/des): the schedule's timeline instead of the closed
// form; plans whose schedule it does not order are estimated in closed form.
class DesEvaluator final : public IEvaluator {
 public:
  const char* name() const override { return "des"; }
  Estimate evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                    const Plan& p) const override;
  // The simulated step keeps the memory model's peak (only the timeline differs), so the
  // closed form's peak holds exactly. No time floor: the timeline can undercut the closed form.
  std::optional<double> peak_memory(const ModelSpec& m, const Cluster& c, const Workload& w,
                                    const Plan& p) const override;
};

}  // namespace dtplan
