#include "cli/framework_check.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "cli/options.h"
#include "core/catalog.h"
#include "core/error.h"

namespace dtplan::cli {

void add_framework_option(CLI::App& cmd, std::string& name) {
  cmd.add_option("--framework", name,
                 "Refuse the plan when this framework cannot run it: megatron, deepspeed or "
                 "torchtitan (default: apply Megatron-LM's rules as warnings); or a framework "
                 "profile NAME[@VERSION] (dtplan list frameworks): its kernels, efficiency and "
                 "defaults, and its stack's rules");
}

std::optional<Framework> profile_rules(const FrameworkProfile& f) {
  if (f.stack == "deepspeed") return Framework::kDeepSpeed;
  if (f.stack == "torchtitan") return Framework::kTorchtitan;
  if (f.stack == "megatron") return Framework::kMegatron;
  return std::nullopt;
}

std::optional<FrameworkProfile> framework_profile_of(const std::string& spec) {
  const auto& rule_sets = framework_names();
  if (spec.empty() || std::find(rule_sets.begin(), rule_sets.end(), spec) != rule_sets.end())
    return std::nullopt;
  const std::string name = spec.substr(0, spec.find('@'));
  if (!has_framework_profile(name)) {
    std::vector<std::string> known = rule_sets;
    for (const std::string& n : list_framework_profile_names()) known.push_back(n);
    throw InputError({}, "--framework",
                     fmt::format("unknown framework '{}'{}; known: {} (a profile takes "
                                 "@VERSION)",
                                 spec, did_you_mean(name, std::span<const std::string>(known)),
                                 fmt::join(known, ", ")));
  }
  return load_framework_profile(spec);
}

FrameworkCheck select_framework(const std::string& spec, const CLI::App& cmd, Resolved& r) {
  std::optional<FrameworkProfile> profile = framework_profile_of(spec);
  if (!profile) {
    FrameworkCheck c = check_framework(spec, r.plan, r.model);
    r.framework = framework_name(c.framework);
    r.failure.writers = checkpoint_writers_of_stack(r.framework);
    check_checkpoint_interval(r);
    return c;
  }
  FrameworkProfile& f = *profile;
  auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
  FrameworkPlanGiven g;
  g.tp_comm_overlap = given("--tp-comm-overlap");
  g.grad_reduce_overlap = given("--no-overlap-grad-reduce") || given("--overlap-grad-reduce");
  g.param_gather_overlap = given("--no-overlap-param-gather") || given("--overlap-param-gather");
  g.fp8_recipe = given("--fp8-recipe");
  g.grads = given("--grads");
  apply_framework_defaults(f, g, r.plan, r.workload);
  check_profile_fp8_recipe(f.name, r.workload, r.cluster.profile);
  std::string kernel = apply_framework_profile(f, r.cluster.profile);
  for (DeviceGroup& d : r.cluster.groups) apply_framework_profile(f, d.profile);
  const std::optional<Framework> rules = profile_rules(f);
  FrameworkCheck c =
      rules ? check_framework(framework_name(*rules), r.plan, r.model) : FrameworkCheck{};
  c.rules = rules.has_value();
  c.given = true;
  c.attention_kernel = std::move(kernel);
  r.framework = f.stack;
  r.failure.writers = checkpoint_writers_of_stack(r.framework);
  check_checkpoint_interval(r);
  c.profile = std::move(profile);
  return c;
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
  if (check.rules)
    for (const FrameworkRule& r : framework_rules(check.framework))
      rules.push_back({{"rule", r.reason}, {"source", r.source}});
  nlohmann::json j = {{"name", check.rules ? framework_name(check.framework) : "none"},
                      {"given", check.given},
                      {"rules_applied", rules}};
  if (check.profile) {
    const FrameworkProfile& f = *check.profile;
    j["profile"] = {{"name", f.name},
                    {"version", f.version},
                    {"stack", f.stack},
                    {"attention_kernel", check.attention_kernel},
                    {"compute_efficiency", f.compute_efficiency}};
  }
  return j;
}

nlohmann::json warnings_to_json(const FrameworkCheck& check) {
  nlohmann::json w = nlohmann::json::array();
  for (const auto& x : check.warnings) w.push_back({{"code", x.code}, {"message", x.message}});
  return w;
}

std::string framework_to_text(const FrameworkCheck& check) {
  std::string t;
  if (check.profile) {
    const FrameworkProfile& f = *check.profile;
    t += fmt::format(
        "framework profile {}{} (frameworks/{}.yaml): attention kernel {}, compute "
        "efficiency {:g}{}\n",
        f.name, f.version.empty() ? "" : "@" + f.version, f.name,
        check.attention_kernel.empty() ? "the hardware profile's" : check.attention_kernel,
        f.compute_efficiency, check.rules ? "" : "; its own trainer: no launch rules apply");
    if (!check.rules) return t;
  }
  t += fmt::format(
      "framework {}{}: {} rules applied, {}\n", framework_name(check.framework),
      check.given ? "" : " (the default; --framework refuses what a framework cannot run)",
      framework_rules(check.framework).size(),
      check.warnings.empty() ? std::string("no warnings")
                             : fmt::format("{} warning(s)", check.warnings.size()));
  for (const auto& w : check.warnings) t += fmt::format("  warning [{}]: {}\n", w.code, w.message);
  return t;
}

}  // namespace dtplan::cli
