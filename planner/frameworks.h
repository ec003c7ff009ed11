// What each training framework can express (issue #4 constraints, CONVENTIONS.md §1-§3).
#pragma once

#include <string>
#include <vector>

#include "core/plan.h"

namespace dtplan {

enum class Framework { kMegatron, kDeepSpeed, kTorchtitan };
const std::vector<std::string>& framework_names();
Framework parse_framework(const std::string& name);  // name must be one of framework_names()

// nullptr when the framework can run the plan, else the reason it cannot.
const char* framework_refusal(Framework f, const Plan& p);

}  // namespace dtplan
