#include "cli/framework_check.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "core/error.h"

namespace dtplan::cli {

void add_framework_option(CLI::App& cmd, std::string& name) {
  cmd.add_option("--framework", name,
                 "Refuse the plan when this framework cannot run it: megatron, deepspeed or "
                 "torchtitan (default: apply Megatron-LM's rules as warnings)");
}

FrameworkCheck check_framework(const std::string& name, const Plan& p, const ModelSpec& m) {
  FrameworkCheck c;
  c.given = !name.empty();
  c.framework = c.given ? parse_framework(name) : Framework::kMegatron;
  if (c.given) {
    if (const FrameworkRule* r = refusing_rule(c.framework, p, m))
      c.refusal = fmt::format("{} cannot run {}: {}{}", framework_name(c.framework), p.describe(),
                              r->reason,
                              *r->source ? fmt::format(" (source: {})", r->source) : std::string());
  }
  // A refused plan gets no "cannot run" warning on top of the refusal.
  for (auto& w : framework_warnings(c.framework, p, m))
    if (!c.refusal || w.code != "framework-cannot-run") c.warnings.push_back(std::move(w));
  return c;
}

void throw_if_refused(const FrameworkCheck& check) {
  if (check.refusal) throw InputError({}, "--framework", *check.refusal);
}

nlohmann::json framework_to_json(const FrameworkCheck& check) {
  nlohmann::json rules = nlohmann::json::array();
  for (const FrameworkRule& r : framework_rules(check.framework))
    rules.push_back({{"rule", r.reason}, {"source", r.source}});
  return {
      {"name", framework_name(check.framework)}, {"given", check.given}, {"rules_applied", rules}};
}

nlohmann::json warnings_to_json(const FrameworkCheck& check) {
  nlohmann::json w = nlohmann::json::array();
  for (const auto& x : check.warnings) w.push_back({{"code", x.code}, {"message", x.message}});
  return w;
}

std::string framework_to_text(const FrameworkCheck& check) {
  std::string t = fmt::format(
      "framework {}{}: {} rules applied, {}\n", framework_name(check.framework),
      check.given ? "" : " (the default; --framework refuses what a framework cannot run)",
      framework_rules(check.framework).size(),
      check.warnings.empty() ? std::string("no warnings")
                             : fmt::format("{} warning(s)", check.warnings.size()));
  for (const auto& w : check.warnings) t += fmt::format("  warning [{}]: {}\n", w.code, w.message);
  return t;
}

}  // namespace dtplan::cli
