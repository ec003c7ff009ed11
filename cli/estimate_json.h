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

}  // namespace dtplan::cli
