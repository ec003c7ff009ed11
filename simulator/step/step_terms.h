// The step-time breakdown as data: every output (JSON, text, report, derivations) and the
// simulator iterate one list of terms instead of naming fields. Terms beyond the core ones
// (compute, recompute, exposed communication per dimension, framework overhead, pipeline
// bubble, optimizer) are plug-ins: a class implementing IStepTerm in one file, registered with
// DTPLAN_REGISTER(IStepTerm, Impl, "name", "description"), plus its build line; the estimator
// adds its seconds to every step and every output shows it.
//
// Contract: seconds() is pure and >= 0; at most kMaxExtraStepTerms terms are registered.
#pragma once

#include <vector>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

class IStepTerm {
 public:
  virtual ~IStepTerm() = default;
  virtual const char* key() const = 0;    // JSON key under "breakdown", e.g. "data_stall_s"
  virtual const char* label() const = 0;  // text label, e.g. "data stall"
  // Seconds the term adds to the step of plan `p`; `e` is the estimate without the plug-in
  // terms (its pipeline, communication and optimizer terms are set), or, for a term that
  // runs beside the step (runs_beside_step), with every other plug-in term added.
  virtual double seconds(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                         const Estimate& e) const = 0;
  // True for work that runs concurrently with the whole step and shows only where it outlasts
  // it (the data loader's prefetch): such a term is priced last, against the step with every
  // other term, so that it hides behind a straggler's delay as behind compute.
  virtual bool runs_beside_step() const { return false; }
};

// The terms of `e`'s breakdown in output order: the core terms, then the registered plug-in
// terms; their seconds sum to e.step_time_s.
std::vector<StepTermValue> step_terms(const Estimate& e);
// The sum of every term but the pipeline bubble (what the simulator subtracts from its step).
double step_terms_without_bubble_s(const Estimate& e);

// Fills e.extra_terms_s from the registered plug-ins and adds them to e.step_time_s (the
// estimator calls it before deriving throughput and utilization). Allocates nothing.
void add_registered_step_terms(const ModelSpec& m, const Cluster& c, const Workload& w,
                               const Plan& p, Estimate& e);

}  // namespace dtplan
