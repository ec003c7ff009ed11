// --framework on check, estimate and simulate: a named framework's rules refuse a plan it cannot
// run (exit 2, the rule named); without the flag Megatron-LM's rules are applied as warnings.
// Either way the output says which framework's rules were applied (planner/frameworks.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/plan.h"
#include "planner/frameworks.h"

namespace CLI {
class App;
}

namespace dtplan::cli {

struct FrameworkCheck {
  Framework framework = Framework::kMegatron;
  bool given = false;                  // --framework was given (refuse) or not (warn)
  std::optional<std::string> refusal;  // given and refused: "deepspeed cannot run ...: rule"
  std::vector<FrameworkWarning> warnings;
};

// Adds --framework to `cmd`; "" (the default) means not given.
void add_framework_option(CLI::App& cmd, std::string& name);

// Applies the framework's rules to `p`. Throws InputError on --framework for an unknown name.
FrameworkCheck check_framework(const std::string& name, const Plan& p, const ModelSpec& m);
// Throws InputError on --framework when check.refusal is set.
void throw_if_refused(const FrameworkCheck& check);

// {"name", "given", "rules_applied": [the framework's rules]}.
nlohmann::json framework_to_json(const FrameworkCheck& check);
// [{"code", "message"}], one per warning.
nlohmann::json warnings_to_json(const FrameworkCheck& check);
// "framework megatron (the default; ...): N rules applied, ..." and one line per warning.
std::string framework_to_text(const FrameworkCheck& check);

}  // namespace dtplan::cli
