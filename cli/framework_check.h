// --framework on check, estimate and simulate: a named framework's rules refuse a plan it cannot
// run (exit 2, the rule named); without the flag Megatron-LM's rules are applied as warnings.
// Either way the output says which framework's rules were applied (planner/frameworks.h).
// --framework may also name a framework profile, NAME[@VERSION] (frameworks/*.yaml,
// core/framework_profile.h): its attention kernel, compute efficiency and defaults (overlaps,
// ZeRO-3 gathers, FP8 recipe) then apply to the estimate, and its stack's rules to the plan.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/framework_profile.h"
#include "core/plan.h"
#include "planner/frameworks.h"

namespace CLI {
class App;
}

namespace dtplan::cli {

struct Resolved;

struct FrameworkCheck {
  Framework framework = Framework::kMegatron;
  bool rules = true;   // false: a profile whose stack is its own trainer (no launch rules)
  bool given = false;  // --framework was given (refuse) or not (warn)
  std::optional<FrameworkProfile> profile;  // --framework named a framework profile
  std::string attention_kernel;             // the profile's kernel applied ("": the hardware's)
  std::optional<std::string> refusal;       // given and refused: "deepspeed cannot run ...: rule"
  std::vector<FrameworkWarning> warnings;
};

// Adds --framework to `cmd`; "" (the default) means not given.
void add_framework_option(CLI::App& cmd, std::string& name);

// Applies the framework's rules to `p`. Throws InputError on --framework for an unknown name.
FrameworkCheck check_framework(const std::string& name, const Plan& p, const ModelSpec& m);

// --framework SPEC for a resolved plan: a rule set (megatron, deepspeed, torchtitan), or a
// framework profile NAME[@VERSION] whose kernels and efficiency go into the cluster's profiles
// and whose defaults go into the plan and workload where `cmd`'s flags did not set them
// (--tp-comm-overlap, --no-overlap-grad-reduce, --no-overlap-param-gather, --fp8-recipe,
// --grads);
// then its stack's rules (none for a stack of its own). Sets r.framework to the stack. Throws
// InputError naming the known rule sets and profiles for an unknown SPEC.
FrameworkCheck select_framework(const std::string& spec, const CLI::App& cmd, Resolved& r);
// The framework profile --framework SPEC names, or nullopt for a rule set (megatron, deepspeed,
// torchtitan) or "" (none given). Throws InputError naming the rule sets and the profiles for an
// unknown name, or the versions for an unknown @VERSION.
std::optional<FrameworkProfile> framework_profile_of(const std::string& spec);
// The stack whose rules a profile's plans follow, or nullopt for one of its own ("other").
std::optional<Framework> profile_rules(const FrameworkProfile& f);
// Throws InputError on --framework when check.refusal is set.
void throw_if_refused(const FrameworkCheck& check);

// {"name", "given", "rules_applied": [the framework's rules]}.
nlohmann::json framework_to_json(const FrameworkCheck& check);
// [{"code", "message"}], one per warning.
nlohmann::json warnings_to_json(const FrameworkCheck& check);
// "framework megatron (the default; ...): N rules applied, ..." and one line per warning.
std::string framework_to_text(const FrameworkCheck& check);

}  // namespace dtplan::cli
