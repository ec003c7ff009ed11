#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/framework_check.h"
#include "cli/options.h"
#include "cli/search_options.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/registry.h"
#include "planner/emit/i_emitter.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/reliability.h"

namespace dtplan::cli {

namespace {

// Fills the plan options from the plan of rank `rank` (1-based) of a `dtplan search --json` file.
void plan_from_search_json(const std::string& path, int rank, SpecOptions& spec, PlanOptions& o,
                           bool model_given, bool cluster_given, std::string* framework,
                           std::string* searched_model) {
  const std::string text = read_input_file(path, "--from");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError({path, 0, 0}, "--from",
                     fmt::format("not JSON (byte {}): {}", e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {  // a number out of range (found by fuzzing)
    throw InputError({path, 0, 0}, "--from", fmt::format("not readable JSON: {}", e.what()));
  }
  if (!j.contains("top") || !j["top"].is_array())
    throw InputError({path, 0, 0}, "--from", "not a `dtplan search --json` result (no 'top' list)");
  if (rank < 1 || rank > static_cast<int>(j["top"].size()))
    throw InputError({}, "--rank",
                     fmt::format("{} has {} ranked plans; --rank {} is out of range", path,
                                 j["top"].size(), rank));
  const std::string at = fmt::format("/top/{}", rank - 1);
  const nlohmann::json& entry = j["top"][static_cast<size_t>(rank - 1)];
  if (!entry.is_object() || !entry.contains("plan") || !entry["plan"].is_object())
    throw InputError(
        {path, 0, 0}, "--from",
        fmt::format("{}: expected a ranked plan (an object with a 'plan' object)", at));
  check_json_integers(entry["plan"], path, {}, at + "/plan");
  if (j.contains("cluster")) check_json_integers(j["cluster"], path, {}, "/cluster");
  // The plan's values pass the checks of the flags that would set them (one validation for a
  // command line and a file): a hand-edited gbs of -64, a recompute of "bogus".
  static constexpr std::pair<const char*, const char*> kPlanFlags[] = {
      {"tp", "--tp"},
      {"pp", "--pp"},
      {"dp", "--dp"},
      {"cp", "--cp"},
      {"ep", "--ep"},
      {"etp", "--etp"},
      {"vpp", "--vpp"},
      {"sp", "--sp"},
      {"zero", "--zero"},
      {"recompute", "--recompute"},
      {"recompute_layers", "--recompute-layers"},
      {"offload_layers", "--cpu-offloading-num-layers"},
      {"uneven_pp", "--uneven-pp"},
      {"account_for_embedding_in_pipeline_split", "--account-for-embedding-in-pipeline-split"},
      {"account_for_loss_in_pipeline_split", "--account-for-loss-in-pipeline-split"},
      {"stage_split", "--stage-split"},
      {"mbs", "--mbs"},
      {"gbs", "--gbs"},
      {"seq", "--seq"},
      {"schedule", "--schedule"},
      {"precision", "--precision"},
      {"attention", "--attention"}};
  // The fields every ranked plan records (the others are newer and default when absent).
  for (const char* key : {"tp", "pp", "dp", "cp", "ep", "etp", "vpp", "sp", "zero", "recompute",
                          "mbs", "gbs", "seq", "schedule", "precision", "attention"})
    if (!entry["plan"].contains(key))
      throw InputError({path, 0, 0}, "--from",
                       fmt::format("{}/plan: no '{}' (not a complete ranked plan)", at, key));
  PlanOptions scratch;
  check_json_as_flags(entry["plan"], path, at + "/plan", kPlanFlags, [&](CLI::App& a) {
    scratch = PlanOptions{};
    add_plan_options(a, scratch);
  });
  try {
    const auto& p = j["top"][static_cast<size_t>(rank - 1)]["plan"];
    // The model as the search was given it (a zoo name or a file; "model" is only its display
    // name, which names no file when the model came from a YAML or config.json).
    const bool flags = j.contains("flags") && j["flags"].is_object();
    *searched_model = j.at("model").get<std::string>();
    if (!model_given)
      spec.model = flags && j["flags"].contains("model")
                       ? recorded_spec_from(j["flags"]["model"].get<std::string>(), path)
                       : j.at("model").get<std::string>();
    // The framework (rule set or profile) the search priced the plans with.
    if (framework->empty() && j.contains("framework") && j["framework"].is_string())
      *framework = j["framework"].get<std::string>();
    if (!cluster_given) {
      if (j.at("cluster").contains("groups"))
        throw InputError({path, 0, 0}, "--from",
                         "the search ran on a cluster with device groups: heterogeneous clusters "
                         "are planned and simulated, but a launch across groups needs the nodes "
                         "listed in group order, which dtplan does not emit yet");
      spec.cluster = flags && j["flags"].contains("cluster")
                         ? recorded_spec_from(j["flags"]["cluster"].get<std::string>(), path)
                         : j.at("cluster").at("profile").get<std::string>();
      spec.gpus = j.at("cluster").at("gpus").get<int>();
    }
    o.tp = p.at("tp");
    o.pp = p.at("pp");
    o.dp = p.at("dp");
    o.cp = p.at("cp");
    o.ep = p.at("ep");
    o.etp = p.at("etp");
    o.vpp = p.at("vpp");
    o.sp = p.at("sp");
    o.zero = p.at("zero");
    o.recompute = p.at("recompute");
    o.recompute_layers = p.value("recompute_layers", 0);
    o.offload_layers = p.value("offload_layers", 0);
    o.uneven_pp = p.value("uneven_pp", false);
    o.account_for_embedding = p.value("account_for_embedding_in_pipeline_split", false);
    o.stage_split = p.value("stage_split", std::string());
    o.account_for_loss = p.value("account_for_loss_in_pipeline_split", false);
    o.mbs = p.at("mbs");
    o.gbs = p.at("gbs");
    o.seq = p.at("seq");
    o.schedule = p.at("schedule");
    o.precision = p.at("precision");
    o.attention = p.at("attention");
  } catch (const nlohmann::json::exception& e) {
    throw InputError({path, 0, 0}, "--from",
                     fmt::format("plan {} is incomplete: {}", rank, e.what()));
  }
}

// The hosts of a --nodes-file: one per line, as a name or as a DeepSpeed hostfile line (`name
// slots=N`, N the node's GPUs); blank lines and `#` comments skipped, CR and surrounding blanks
// dropped. A name with characters no host name has, a host given twice, other slots or fewer
// hosts than the plan's nodes is refused at its line (it wrote made-up `node-1` lines, kept
// `slots=8 slots=8` and CRs; hostile-input trial).
std::vector<std::string> read_nodes_file(const std::string& path, const Cluster& c) {
  std::istringstream in(read_input_file(path, "--nodes-file"));
  std::vector<std::string> hosts;
  std::vector<int> at;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string host, extra;
    if (!(words >> host)) continue;
    auto fail = [&](const std::string& why) {
      throw InputError({path, n, 1}, "--nodes-file", why);
    };
    for (char ch : host)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_'))
        fail(fmt::format("'{}' is not a host name (letters, digits, '.', '-', '_')", host));
    if (words >> extra) {
      const std::string want = fmt::format("slots={}", c.profile.node.gpus_per_node);
      std::string more;
      if (extra != want || (words >> more))
        fail(fmt::format("expected a host name, or '{} {}' (a DeepSpeed hostfile line), got '{}'",
                         host, want, line));
    }
    for (size_t i = 0; i < hosts.size(); ++i)
      if (hosts[i] == host) fail(fmt::format("host '{}' is given twice (line {})", host, at[i]));
    hosts.push_back(host);
    at.push_back(n);
  }
  if (static_cast<int>(hosts.size()) < c.nodes())
    throw InputError({path, 0, 0}, "--nodes-file",
                     fmt::format("{} host(s) for the plan's {} nodes", hosts.size(), c.nodes()));
  return hosts;
}

// The interval the files checkpoint at when the user turns checkpoints on: the one estimate
// prices (Young's optimum for the job's MTBF and this plan's checkpoint, or
// --checkpoint-interval-s; docs/resilience.md), in whole steps of the estimated step.
void set_save_interval(const Resolved& r, EmitInput& in) {
  const Estimate e = estimate(r.model, r.cluster, r.workload, r.plan, EstimatorOptions{});
  const FailureCosts f = failure_costs(r.model, r.cluster, r.plan, e.step_time_s, r.failure);
  // An asynchronous interval raised to the storage write stays at or above it.
  const double steps =
      f.interval_raised ? std::ceil(f.interval_steps) : std::round(f.interval_steps);
  in.save_interval_steps = std::max<int64_t>(1, static_cast<int64_t>(std::min(steps, 1e9)));
  in.async_save = r.failure.async_save;
  const std::string blocking = fmt::format("{:.1f} s {}", f.checkpoint_blocking_s,
                                           f.async_save ? "device-to-host copy" : "write");
  in.save_interval_why =
      r.failure.interval_s
          ? fmt::format("--checkpoint-interval-s {:.0f} over a {:.2f} s step",
                        *r.failure.interval_s, e.step_time_s)
          : fmt::format(
                "Young's interval {:.0f} s for a job MTBF of {:.1f} h and a {} per "
                "checkpoint{}, over a {:.2f} s step (dtplan estimate shows the arithmetic)",
                f.young_interval_s, f.job_mtbf_s / 3600, blocking,
                f.interval_raised
                    ? fmt::format(", raised to the {:.0f} s storage write", f.interval_s)
                    : "",
                e.step_time_s);
}

}  // namespace

void register_launch(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "launch",
      "Write ready-to-run launch files for a plan (Megatron-LM + Slurm, DeepSpeed, torchtitan)");
  static SpecOptions spec;
  static PlanOptions plan;
  static std::string format, out_dir, from, nodes_file, job_name = "dtplan";
  static std::string partition, account, time_limit, version, framework;
  static int rank = 1;
  static std::string searched_model;
  add_spec_options(*cmd, spec);
  add_plan_options(*cmd, plan);
  add_checkpoint_options(*cmd, spec);
  cmd->add_option("--format,-f", format, "megatron | deepspeed | torchtitan (dtplan list emitters)")
      ->required();
  cmd->add_option("--out,-o", out_dir, "Folder to write the files into (created if missing)")
      ->required();
  cmd->add_option("--from", from, "Take the plan from a `dtplan search --json` file");
  cmd->add_option("--rank", rank, "Which ranked plan of --from (1 = best)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--framework", framework,
                  "Framework profile NAME[@VERSION] whose defaults the plan takes (gradient "
                  "dtype, FP8 recipe, overlaps), as estimate and search price it; default: the "
                  "--from search's");
  cmd->add_option("--framework-version", version,
                  "Framework release to write for (default: the newest the format knows; "
                  "`dtplan list emitters` names them)");
  cmd->add_option("--nodes-file", nodes_file, "Host names, one per line (DeepSpeed hostfile)");
  cmd->add_option("--job-name", job_name, "Slurm job name")->capture_default_str();
  cmd->add_option("--partition", partition, "Slurm partition (#SBATCH --partition)");
  cmd->add_option("--account", account, "Slurm account (#SBATCH --account)");
  cmd->add_option("--time", time_limit, "Slurm time limit, e.g. 04:00:00 (#SBATCH --time)");
  cmd->callback([&ctx, cmd] {
    const auto names = emitter_names();
    const IEmitter* emitter = find_emitter(format);
    if (!emitter)
      throw InputError({}, "--format",
                       fmt::format("unknown format '{}'{}; known: {}", format,
                                   did_you_mean(format, std::span<const std::string>(names)),
                                   fmt::join(names, ", ")));
    if (!from.empty()) {
      // The plan fields --from fills: a flag for one of them would be silently overwritten.
      for (const char* f : {"--tp",
                            "--pp",
                            "--dp",
                            "--cp",
                            "--ep",
                            "--etp",
                            "--vpp",
                            "--sp",
                            "--zero",
                            "--recompute",
                            "--recompute-layers",
                            "--cpu-offloading-num-layers",
                            "--uneven-pp",
                            "--account-for-embedding-in-pipeline-split",
                            "--account-for-loss-in-pipeline-split",
                            "--stage-split",
                            "--mbs",
                            "--gbs",
                            "--gbs-tokens",
                            "--seq",
                            "--schedule",
                            "--precision",
                            "--attention"})
        if (cmd->count(f) > 0)
          throw InputError({}, f,
                           fmt::format("cannot be combined with --from: the plan is rank {} of "
                                       "{}; give the plan by flags without --from, or search "
                                       "again with {} pinned",
                                       rank, from, f));
    }
    if (!from.empty())
      plan_from_search_json(from, rank, spec, plan, cmd->count("--model") > 0,
                            cmd->count("--cluster") + cmd->count("--gpus") > 0, &framework,
                            &searched_model);
    std::vector<Violation> violations;
    Resolved r = resolve(spec, plan, violations);
    // --model beside --from may point at the file where it now lives, not at another model.
    if (!from.empty() && cmd->count("--model") > 0 && r.model.name != searched_model)
      throw InputError({}, "--model",
                       fmt::format("names {}, but {} ranked plans for {}: a plan searched for "
                                   "one model does not fit another",
                                   r.model.name, from, searched_model));
    if (report_violations(violations)) {
      ctx.exit_code = 2;
      return;
    }
    // A framework profile's defaults, as the estimate and the search applied them; a rule set
    // (megatron, deepspeed, torchtitan) changes nothing here: the format's emitter refuses
    // what its framework cannot run.
    if (framework_profile_of(framework)) select_framework(framework, *cmd, r);
    if (r.cluster.heterogeneous())
      throw InputError({}, "--cluster",
                       fmt::format("{} has device groups: heterogeneous clusters are planned and "
                                   "simulated, but a launch across groups needs the nodes listed "
                                   "in group order, which dtplan does not emit yet",
                                   r.cluster.file));
    if (const std::string why = partial_node_refusal(r.cluster); !why.empty())
      throw InputError({}, "--gpus", why);
    EmitInput in;
    in.model = &r.model;
    in.cluster = &r.cluster;
    in.work = &r.workload;
    in.plan = &r.plan;
    in.job_name = job_name;
    in.partition = partition;
    in.account = account;
    in.time_limit = time_limit;
    in.version = version;
    if (!nodes_file.empty()) in.hosts = read_nodes_file(nodes_file, r.cluster);
    // The format's framework writes the checkpoints (a profile's stack is the format's).
    r.failure.writers = checkpoint_writers_of_stack(format);
    check_checkpoint_interval(r);
    set_save_interval(r, in);
    const FrameworkVersion& v = chosen_version(*emitter, in);
    if (const std::string why = emitter->refusal(in); !why.empty())
      throw InputError({}, "--format",
                       fmt::format("{} cannot run {} of {} (version {}): {}", format,
                                   r.plan.describe(), r.model.name, v.name, why));
    const std::vector<EmittedFile> files = emitter->emit(in);
    // Paths on stdout, one per line (for scripts); what each file still needs on stderr.
    fmt::print(stderr, "{} launch files for {}\n", format, v.description);
    std::vector<OutputFile> set;
    set.reserve(files.size());
    for (const EmittedFile& f : files) set.push_back({f.name, f.content, f.executable});
    // One set: a kill at any moment leaves the old files or the new ones (core/atomic_file.h).
    if (const std::string how = write_files_atomic(out_dir, set); !how.empty())
      fmt::print(stderr, "dtplan: note: {}\n", how);
    for (const EmittedFile& f : files) {
      const std::string path = (std::filesystem::path(out_dir) / f.name).string();
      fmt::print("{}\n", path);
      fmt::print(stderr, "  {}: {}\n", f.name,
                 f.needs.empty() ? "complete" : "you provide " + f.needs);
    }
    ctx.exit_code = 0;
  });
}

}  // namespace dtplan::cli
