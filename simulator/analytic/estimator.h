// The closed-form estimator: composes the op program's per-op costs into a step time with
// its breakdown, throughput, MFU/HFU and per-stage memory. Fast path for the search.
//
// Contract: estimate() allocates nothing; the plan must have passed validate_plan and
// validate_schedule (violations are the caller's to report).
#pragma once

#include <string>
#include <vector>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "simulator/cost/flops.h"

namespace dtplan {

struct EstimatorOptions {
  FlopsConvention flops = FlopsConvention::kCausalHalf;
};

Estimate estimate(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                  const EstimatorOptions& opt = {});

// Memory of every pipeline rank (for reports and --json); allocates.
std::vector<StageMemory> all_stage_memory(const ModelSpec& m, const Workload& w, const Plan& p);

// The schedule exists and the plan gives it the chunks it needs.
std::vector<Violation> validate_schedule(const Plan& p);

// Registered pipeline schedule names.
std::vector<std::string> schedule_names();

}  // namespace dtplan
