// What each training framework can express (issue #4 constraints, CONVENTIONS.md §1-§3), as a
// table of refusal rules with the framework code each comes from, and the warnings a plan earns
// when the framework runs it only through a feature that is not its default set-up.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

enum class Framework { kMegatron, kDeepSpeed, kTorchtitan };
const std::vector<std::string>& framework_names();  // indexed by Framework
const char* framework_name(Framework f);
// Throws InputError on `field` for an unknown name, with the known names and a "did you mean".
Framework parse_framework(std::string_view name, const std::string& field = "--framework");

// One thing a framework cannot run. `source` names the framework code the rule was checked
// against (repository file @ commit), or is "" where the rule is dtplan's own reading. A rule
// looks at the layout (tp, pp, vpp, cp, ep, etp, sp, split), the ZeRO stage, the schedule and
// the plan's overlap switches only: the search decides it once per those (planner/search.cpp),
// so what depends on recomputation or the batch is an emitter's refusal instead.
struct FrameworkRule {
  const char* reason;
  const char* source;
  bool (*refuses)(const Plan& p, const ModelSpec& m);
};
std::span<const FrameworkRule> framework_rules(Framework f);

// The first rule of `f` that refuses `p`, or nullptr when the framework can run the plan.
const FrameworkRule* refusing_rule(Framework f, const Plan& p, const ModelSpec& m);
// Whether torchtitan's main branch lifts this rule of its release (the rules describe v0.2.2,
// the version `launch --format torchtitan` writes by default).
bool torchtitan_main_lifts(const FrameworkRule& r);
// refusing_rule()->reason, or nullptr.
const char* framework_refusal(Framework f, const Plan& p, const ModelSpec& m);

// Something a plan needs that `f` does not do by default, or cannot do at all. `code` is stable
// (JSON); `message` is one sentence for people.
struct FrameworkWarning {
  std::string code;     // "framework-cannot-run", "megatron-fsdp", "zero3-with-pp"
  std::string message;  // what is needed, and from which framework
};
// Warnings for running `p` under `f`: "framework-cannot-run" when a rule of `f` refuses it (with
// the frameworks that can), and the non-default features it needs. Empty when there are none.
std::vector<FrameworkWarning> framework_warnings(Framework f, const Plan& p, const ModelSpec& m);

// torchtitan's name for a dtplan pipeline schedule (parallelism.pipeline_parallel_schedule), or
// nullptr when torchtitan has none; torchtitan_schedules() lists the dtplan names it has.
const char* torchtitan_schedule_name(std::string_view schedule);
const std::vector<std::string>& torchtitan_schedules();

}  // namespace dtplan
