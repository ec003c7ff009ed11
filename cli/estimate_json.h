// Text and JSON renderings of an Estimate (the JSON keys are a contract: see README).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cli/options.h"
#include "core/estimate.h"
#include "reports/uncertainty.h"
#include "simulator/cost/flops.h"

namespace dtplan::cli {

// With device groups: each group's profile, GPU, nodes, first rank, GPUs, stages, memory.
nlohmann::json device_groups_json(const Cluster& c, const Plan& p);
nlohmann::json estimate_to_json(const Resolved& r, const Estimate& e, FlopsConvention conv);
std::string estimate_to_text(const Resolved& r, const Estimate& e, FlopsConvention conv);
// The warnings that travel with a step's numbers, after the framework's, for estimate and
// simulate alike: the plan's (peak GPU or host memory over capacity; a failure model outside
// the range its first-order formula holds in), then how sure the numbers are (uncertainty_of,
// with `calibration_flags` from the CalibrationCoverage of the estimate).
std::vector<NumberWarning> step_warnings(const Resolved& r, const Estimate& e,
                                         const std::vector<std::string>& calibration_flags);
// `warnings` appended to a JSON array of {code, message} / as "warning [code]: message" lines
// (outside-calibration is listed apart in text, under "Calibration:").
void append_warnings(nlohmann::json& array, const std::vector<NumberWarning>& warnings);
std::string warnings_to_text(const std::vector<NumberWarning>& warnings,
                             const std::vector<std::string>& calibration_flags,
                             const std::string& profile_name);
// `estimate --ops`: every op of the op program (one micro-batch on one GPU of the first device
// group) with its shape, time, share of the peak and launch time, and each layer kind's totals
// per pass (what LayerCost sums before overlap and the host floor).
nlohmann::json ops_to_json(const Resolved& r);
std::string ops_to_text(const Resolved& r);

}  // namespace dtplan::cli
