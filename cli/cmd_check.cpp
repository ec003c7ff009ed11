#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/estimate_json.h"
#include "cli/framework_check.h"
#include "cli/options.h"
#include "core/error.h"
#include "reports/claims.h"

namespace dtplan::cli {

static std::string human(int64_t n) {
  const double v = static_cast<double>(n);
  if (v >= 1e9) return fmt::format("{:.3f} B", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} K", v / 1e3);
  return fmt::format("{}", n);
}

// `check --claims`: every claim of the file, its findings as text or JSON; 3 when any is
// refuted, 0 otherwise.
static int run_claims(const std::string& path, const ClaimCheckOptions& opt, bool json) {
  const std::vector<Claim> claims = load_claims(path);
  nlohmann::json all = nlohmann::json::array();
  std::string text;
  bool refuted = false;
  for (const Claim& c : claims) {
    const ClaimResult r = check_claim(c, opt);
    refuted = refuted || !r.refuted.empty();
    auto findings = [](const std::vector<ClaimFinding>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (const ClaimFinding& f : v)
        a.push_back({{"code", f.code}, {"statements", f.statements}, {"message", f.message}});
      return a;
    };
    nlohmann::json j = {{"name", r.name},
                        {"source", c.source},
                        {"where", c.where.to_string()},
                        {"consistent", r.checks() > 0 ? nlohmann::json(r.refuted.empty())
                                                      : nlohmann::json(nullptr)},
                        {"checks", r.checks()},
                        {"refuted", findings(r.refuted)},
                        {"agreeing", findings(r.consistent)},
                        {"derived", findings(r.derived)},
                        {"missing", r.missing},
                        {"notes", r.notes}};
    all.push_back(j);
    text += fmt::format(
        "{}: {}\n{}", r.name,
        r.refuted.empty() ? (r.checks() > 0 ? "consistent" : "nothing to check")
                          : fmt::format("REFUTED ({} of {} checks)", r.refuted.size(), r.checks()),
        c.source.empty() ? "" : fmt::format("  source      {}\n", c.source));
    for (const ClaimFinding& f : r.refuted) text += fmt::format("  refuted     {}\n", f.message);
    for (const ClaimFinding& f : r.consistent) text += fmt::format("  consistent  {}\n", f.message);
    for (const ClaimFinding& f : r.derived) text += fmt::format("  derived     {}\n", f.message);
    for (const std::string& m : r.missing) text += fmt::format("  missing     {}\n", m);
    for (const std::string& n : r.notes) text += fmt::format("  note        {}\n", n);
  }
  if (json) {
    bool checked = false;
    for (const auto& c : all) checked = checked || c["checks"].get<int>() > 0;
    nlohmann::json j = {{"file", path},
                        {"consistent", refuted   ? nlohmann::json(false)
                                       : checked ? nlohmann::json(true)
                                                 : nlohmann::json(nullptr)},
                        {"claims", all}};
    fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    fmt::print("{}", text);
  }
  return refuted ? kExitRefuted : 0;
}

void register_check(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "check", "Validate a model (and a cluster and plan when given) and print the derived counts");
  static SpecOptions spec;
  static PlanOptions plan;
  static bool json = false;
  static std::string framework;
  add_spec_options(*cmd, spec);
  add_plan_options(*cmd, plan);
  add_framework_option(*cmd, framework);
  cmd->add_flag("--json", json, "Machine-readable output");
  static std::string claims;
  static ClaimCheckOptions claim_opt;
  cmd->add_option("--claims", claims,
                  "Check the statements of a claim YAML (a run's model, GPUs, layout, MFU, "
                  "throughput, tokens, days, memory) against each other and dtplan's model; "
                  "exit 3 when one is refuted (docs/claims.md)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tolerance", claim_opt.tolerance,
                  "With --claims: how far two statements' throughputs may differ")
      ->check(finite_range(0.0, 10.0))
      ->capture_default_str();
  cmd->add_option("--model-tolerance", claim_opt.model_tolerance,
                  "With --claims: how far a statement may beat dtplan's prediction")
      ->check(finite_range(0.0, 10.0))
      ->capture_default_str();
  cmd->callback([&ctx, cmd] {
    if (!claims.empty()) {
      // The claim file states the run: flags that would state it too are refused, not ignored.
      for (const char* f : {"--model", "--cluster", "--gpus", "--tp", "--pp", "--dp", "--cp",
                            "--ep", "--vpp", "--zero", "--mbs", "--gbs", "--seq", "--framework"})
        if (cmd->count(f) > 0)
          throw InputError({}, f, "is stated by the claim file: give it there, not with --claims");
      ctx.exit_code = run_claims(claims, claim_opt, json);
      return;
    }
    for (const char* f : {"--tolerance", "--model-tolerance"})
      if (cmd->count(f) > 0) throw InputError({}, f, "applies to --claims");
    const bool with_cluster = cmd->count("--cluster") + cmd->count("--gpus") > 0;
    if (!with_cluster && !framework.empty())
      throw InputError({}, "--framework",
                       "applies to a plan: give --cluster or --gpus (and the plan flags)");
    ModelSpec m = load_model(spec.model);
    ParamCounts c = count_params(m);
    nlohmann::json j;
    j["model"] = {{"name", m.name},         {"file", m.file},
                  {"layers", m.layers},     {"hidden", m.hidden},
                  {"heads", m.heads},       {"kv_heads", m.kv_heads},
                  {"head_dim", m.head_dim}, {"moe_layers", m.moe_layer_count()}};
    j["params"] = {{"embedding", c.embedding},
                   {"position", c.position},
                   {"output", c.output},
                   {"attention", c.attention},
                   {"dense_mlp", c.dense_mlp},
                   {"routed_experts", c.routed_experts},
                   {"shared_experts", c.shared_experts},
                   {"router", c.router},
                   {"norms", c.norms},
                   {"mtp", c.mtp},
                   {"total", c.total()},
                   {"active", c.active()}};
    std::vector<Violation> violations;
    std::optional<Resolved> r;
    std::optional<FrameworkCheck> fw;
    std::string groups_note;
    if (with_cluster) {
      r = resolve(spec, plan, violations);
      // A heterogeneous cluster checked without --pp: the default single stage spans the
      // groups; say what a plan needs instead of blaming a flag that was not given.
      if (r->cluster.heterogeneous() && cmd->count("--pp") == 0) {
        const auto spans = [](const Violation& v) {
          return (v.flag == "--pp" || v.flag == "--rank-order") &&
                 v.reason.find("device groups") != std::string::npos;
        };
        if (std::any_of(violations.begin(), violations.end(), spans))
          groups_note = fmt::format(
              "the cluster has {} device groups: a plan needs --pp such that every pipeline "
              "stage lies inside one group (the groups' first ranks must be multiples of {} / "
              "pp; docs/heterogeneous.md)",
              r->cluster.groups_used(), r->cluster.num_gpus);
        violations.erase(std::remove_if(violations.begin(), violations.end(), spans),
                         violations.end());
      }
      j["cluster"] = {{"profile", r->cluster.profile.name},
                      {"gpus", r->cluster.num_gpus},
                      {"nodes", r->cluster.nodes()}};
      if (r->cluster.heterogeneous())
        j["cluster"]["groups"] = device_groups_json(r->cluster, r->plan);
      j["plan"] = {{"layout", r->plan.describe()}, {"valid", violations.empty()}};
      nlohmann::json vs = nlohmann::json::array();
      for (const auto& v : violations) vs.push_back({{"flag", v.flag}, {"reason", v.reason}});
      j["plan"]["violations"] = vs;
      if (!groups_note.empty()) j["plan"]["note"] = groups_note;
      fw = select_framework(framework, *cmd, *r);
      j["framework"] = framework_to_json(*fw);
      if (fw->refusal) j["framework"]["refusal"] = *fw->refusal;
      j["warnings"] = warnings_to_json(*fw);
    }
    if (json) {
      fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      fmt::print("model {} ({}) from {}\n", m.name, m.display_name, m.file);
      fmt::print("  {} layers, hidden {}, {} heads ({} KV, head dim {}), FFN {} {}, vocab {}{}\n",
                 m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn_hidden,
                 to_string(m.ffn_act), m.vocab, m.tied_embeddings ? ", tied embeddings" : "");
      if (m.moe)
        fmt::print("  MoE: {} experts top-{} (width {}), {} shared, {} MoE layers of {}\n",
                   m.moe->experts, m.moe->topk, m.moe->expert_ffn_hidden, m.moe->shared_experts,
                   m.moe_layer_count(), m.layers);
      if (m.mla)
        fmt::print("  MLA: q_lora {}, kv_lora {}, qk {}+{}, v {}\n", m.mla->q_lora_rank,
                   m.mla->kv_lora_rank, m.mla->qk_nope_head_dim, m.mla->qk_rope_head_dim,
                   m.mla->v_head_dim);
      fmt::print("parameters\n");
      auto row = [](const char* name, int64_t n) {
        if (n != 0) fmt::print("  {:<16} {:>12}\n", name, human(n));
      };
      row("embedding", c.embedding);
      row("position", c.position);
      row("output", c.output);
      row("attention", c.attention);
      row("dense MLP", c.dense_mlp);
      row("routed experts", c.routed_experts);
      row("shared experts", c.shared_experts);
      row("router", c.router);
      row("norms", c.norms);
      fmt::print("  {:<16} {:>12}\n", "total", human(c.total()));
      fmt::print("  {:<16} {:>12}\n", "active/token", human(c.active()));
      if (c.mtp) fmt::print("  {:<16} {:>12} (not in total)\n", "MTP modules", human(c.mtp));
      if (r) {
        const Cluster& cl = r->cluster;
        if (cl.heterogeneous()) {
          fmt::print("cluster {} GPUs in {} device groups ({} nodes of {})\n", cl.num_gpus,
                     cl.groups_used(), cl.nodes(), cl.profile.node.gpus_per_node);
          for (int g = 0; g < cl.groups_used(); ++g)
            fmt::print("  group {}: {} x {}, ranks {}-{}\n", g,
                       cl.group_first_rank(g + 1) - cl.group_first_rank(g),
                       cl.groups[static_cast<size_t>(g)].profile.name, cl.group_first_rank(g),
                       cl.group_first_rank(g + 1) - 1);
        } else {
          fmt::print("cluster {} x {} GPUs ({} nodes of {})\n", cl.profile.name, cl.num_gpus,
                     cl.nodes(), cl.profile.node.gpus_per_node);
        }
        fmt::print("plan {}\n", r->plan.describe());
        if (violations.empty() && groups_note.empty()) fmt::print("  valid\n");
        if (violations.empty() && !groups_note.empty())
          fmt::print("  model and cluster valid; {}\n", groups_note);
        for (const auto& v : violations) fmt::print("  invalid: {}: {}\n", v.flag, v.reason);
        if (fw->refusal) fmt::print("  refused: --framework: {}\n", *fw->refusal);
        fmt::print("{}", framework_to_text(*fw));
      }
    }
    if (!violations.empty()) {
      if (json)
        fmt::print(stderr, "dtplan: error: the plan is invalid ({} violations)\n",
                   violations.size());
      else
        for (const auto& v : violations)
          fmt::print(stderr, "dtplan: error: {}: {}\n", v.flag, v.reason);
      ctx.exit_code = 2;
    }
    if (fw && fw->refusal) {
      // The same message estimate and simulate give (they throw it).
      fmt::print(stderr, "dtplan: error: {}\n", InputError({}, "--framework", *fw->refusal).what());
      ctx.exit_code = 2;
    }
  });
}

}  // namespace dtplan::cli
