// The closed-form estimator: composes the op program's per-op costs into a step time with
// its breakdown, throughput, MFU/HFU and per-stage memory. Fast path for the search.
//
// Contract: estimate() allocates nothing; the plan must have passed validate_plan and
// validate_schedule (violations are the caller's to report).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "simulator/cost/flops.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/step/step_costs.h"

namespace dtplan {

struct EstimatorOptions {
  FlopsConvention flops = FlopsConvention::kCausalHalf;
};

Estimate estimate(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                  const EstimatorOptions& opt = {});

// Per-layer op costs keyed by the plan fields they depend on (tp, cp, sp, micro-batch,
// recomputation, experts, overlaps), so that a search pays for them once per key instead of once
// per plan (ARCHITECTURE.md principle 5); also collective prices, group placements, layer splits,
// and the last stage times, memory and FLOP count (a search asks for a plan's memory, its floor
// and its estimate in a row, and its next plans differ in one field). One cache serves one model,
// cluster, sequence length and precision: it empties itself when called with others (the global
// batch may differ from call to call). Not thread-safe: one per thread.
class EstimatorCache {
 public:
  EstimatorCache();
  ~EstimatorCache();
  EstimatorCache(const EstimatorCache&) = delete;
  EstimatorCache& operator=(const EstimatorCache&) = delete;
  size_t size() const;
  struct Impl;

 private:
  friend Estimate estimate(const ModelSpec&, const Cluster&, const Workload&, const Plan&,
                           const EstimatorOptions&, EstimatorCache*, StepCosts*);
  friend double peak_memory_bytes(const ModelSpec&, const Cluster&, const Workload&, const Plan&,
                                  EstimatorCache*);
  friend double step_time_floor(const ModelSpec&, const Cluster&, const Workload&, const Plan&,
                                EstimatorCache*);
  friend double zero_time_floor(const ModelSpec&, const Cluster&, const Workload&, const Plan&,
                                EstimatorCache*);
  friend double microbatch_time_floor(const ModelSpec&, const Cluster&, const Workload&,
                                      const Plan&, EstimatorCache*);
  std::unique_ptr<Impl> impl_;
};

// The same estimate, reusing (and filling) the cache; allocates only on a cache miss. With
// `detail`, also the per-stage costs the simulator schedules (allocates).
Estimate estimate(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                  const EstimatorOptions& opt, EstimatorCache* cache, StepCosts* detail = nullptr);

// What a search prunes with, at a fraction of an estimate's cost (same cache, same contract):
// Exactly estimate(m, c, w, p).memory_peak.total_bytes().
double peak_memory_bytes(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                         EstimatorCache* cache = nullptr);
// A floor under estimate(m, c, w, q).step_time_s for every plan q that differs from p only in its
// ZeRO stage: p's pipeline time (compute, exposed TP/CP/EP/PP communication, host-dispatch
// floors, bubble) plus the optimizer step's fixed host time; ZeRO changes neither.
double step_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                       EstimatorCache* cache = nullptr);
// What the plan's own ZeRO stage adds to step_time_floor at least, so that step_time_floor(p) +
// zero_time_floor(p) <= estimate(p).step_time_s: with ZeRO-3, the busiest rank's exposed
// per-layer gathers and reduce-scatters during the step (the estimate's exposed data-parallel
// time is at least any rank's); 0 for the other stages and on a heterogeneous cluster.
double zero_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                       EstimatorCache* cache = nullptr);
// A floor per micro-batch under estimate(m, c, w, q).step_time_s / q.num_microbatches() for
// every plan q that differs from p only in its global batch: the largest compute of a rank for
// one micro-batch (its passes less the exchanges charged inside them: no rank ends before it
// has run every micro-batch's, the IPipelineSchedule contract), or with ZeRO-3 the busiest
// rank's plus its exposed per-layer traffic of one micro-batch if that is more. 0 on a
// heterogeneous cluster.
double microbatch_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                             EstimatorCache* cache = nullptr);

// pipeline_exchanges_per_pass: simulator/schedule/i_pipeline_schedule.h.

// Memory of every pipeline rank (for reports and --json); allocates.
std::vector<StageMemory> all_stage_memory(const ModelSpec& m, const Workload& w, const Plan& p);

// The schedule exists and the plan gives it the chunks it needs.
std::vector<Violation> validate_schedule(const Plan& p);

// Registered pipeline schedule names.
std::vector<std::string> schedule_names();

}  // namespace dtplan
