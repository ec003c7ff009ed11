// Text and JSON renderings of an Estimate (the JSON keys are a contract: see README).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cli/options.h"
#include "core/estimate.h"
#include "simulator/cost/flops.h"

namespace dtplan::cli {

// With device groups: each group's profile, GPU, nodes, first rank, GPUs, stages, memory.
nlohmann::json device_groups_json(const Cluster& c, const Plan& p);
nlohmann::json estimate_to_json(const Resolved& r, const Estimate& e, FlopsConvention conv);
std::string estimate_to_text(const Resolved& r, const Estimate& e, FlopsConvention conv);
// `estimate --ops`: every op of the op program (one micro-batch on one GPU of the first device
// group) with its shape, time, share of the peak and launch time, and each layer kind's totals
// per pass (what LayerCost sums before overlap and the host floor).
nlohmann::json ops_to_json(const Resolved& r);
std::string ops_to_text(const Resolved& r);

}  // namespace dtplan::cli
