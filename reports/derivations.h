// Derivations of the recommended plan's headline numbers: each with its formula, the values that
// went in and the result, computed from the same cost-model functions the estimator calls
// (params_on_rank, the schedule's parameter copies, place_groups, the estimator's per-stage
// pipeline detail), so that a formula's value and the estimator's figure cannot disagree
// (tests/unit/reports check value == estimator_value for every derivation).
#pragma once

#include <vector>

#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "reports/report_data.h"
#include "simulator/cost/reliability.h"

namespace dtplan::reports {

// `e` is estimate(m, c, w, p) with the default options.
std::vector<Derivation> derive(const ModelSpec& m, const Cluster& c, const Workload& w,
                               const Plan& p, const Estimate& e);

// Checkpoints and failures of the plan (simulator/cost/reliability.h) and its data loader, each
// figure from its parts; estimator_value is failure_costs()' figure (tests check they agree).
std::vector<Derivation> derive_failures(const ModelSpec& m, const Cluster& c, const Workload& w,
                                        const Plan& p, const Estimate& e,
                                        const FailureOptions& o = {});

// What the training precision changes, on the peak stage: which GEMMs run in FP8 and which stay
// in 16 bits, FP8's weight copies and scaling state by recipe, FP16's loss scaling.
std::vector<Derivation> derive_precision(const ModelSpec& m, const Cluster& c, const Workload& w,
                                         const Plan& p, const Estimate& e);

// "2.16 GB", "812 MB": bytes in decimal units, as the examples write them.
std::string human_bytes(double bytes);

}  // namespace dtplan::reports
