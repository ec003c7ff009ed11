#include "cli/search_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "cli/estimate_json.h"
#include "cli/framework_check.h"
#include "core/catalog.h"
#include "core/error.h"
#include "core/input_file.h"
#include "planner/emit/i_emitter.h"
#include "reports/uncertainty.h"
#include "simulator/analytic/estimator.h"

namespace dtplan::cli {

namespace {

// One integer of a pin; `whole` is the flag's text, for the message.
int64_t parse_number(const std::string& s, const std::string& flag, const std::string& whole,
                     bool positive, int64_t max) {
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used != s.size() || v < (positive ? 1 : 0) || v > max) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    throw InputError({}, flag,
                     fmt::format("'{}' is not {}, a list (2,4,8) or a range (4-16)", whole,
                                 positive ? "a positive integer" : "a non-negative integer"));
  }
}

// "8", "2,4,8" or "4-16" (every integer in the range; the search keeps the feasible ones).
template <typename Int>
std::vector<Int> parse_set(const std::string& text, const std::string& flag, Int max_width,
                           bool positive = false) {
  std::vector<Int> out;
  if (text.empty()) return out;
  std::stringstream ss(text);
  std::string item;
  auto to_int = [&](const std::string& v) {
    return static_cast<Int>(parse_number(v, flag, text, positive, std::numeric_limits<Int>::max()));
  };
  while (std::getline(ss, item, ',')) {
    const auto dash = item.find('-');
    if (dash == std::string::npos) {
      out.push_back(to_int(item));
    } else {
      const Int lo = to_int(item.substr(0, dash)), hi = to_int(item.substr(dash + 1));
      if (lo > hi || hi - lo > max_width)
        throw InputError({}, flag,
                         lo > hi ? fmt::format("range '{}' is empty", item)
                                 : fmt::format("range '{}' is too wide (at most {} values)", item,
                                               max_width + 1));
      for (Int v = lo; v <= hi; ++v) out.push_back(v);
    }
  }
  return out;
}

// Global batches from --gbs (sequences) or --gbs-tokens (tokens, whole sequences of --seq): a
// value, a list or a range; a token range keeps the whole numbers of sequences inside it.
std::vector<int64_t> parse_global_batches(const std::string& gbs, const std::string& tokens,
                                          int64_t seq) {
  constexpr int64_t kMaxValues = 100000;
  constexpr int64_t kMax = int64_t{1} << 50;
  if (tokens.empty()) return parse_set<int64_t>(gbs, "--gbs", kMaxValues - 1, true);
  const std::string flag = "--gbs-tokens";
  std::vector<int64_t> out;
  std::stringstream ss(tokens);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto dash = item.find('-');
    if (dash == std::string::npos) {
      const int64_t t = parse_number(item, flag, tokens, true, kMax);
      if (t % seq != 0)
        throw InputError(
            {}, flag,
            fmt::format("{} tokens are not a whole number of sequences of {} (--seq)", t, seq));
      out.push_back(t / seq);
    } else {
      const int64_t lo_t = parse_number(item.substr(0, dash), flag, tokens, true, kMax);
      const int64_t hi_t = parse_number(item.substr(dash + 1), flag, tokens, true, kMax);
      const int64_t lo = (lo_t + seq - 1) / seq, hi = hi_t / seq;
      if (lo_t > hi_t || lo > hi)
        throw InputError(
            {}, flag,
            fmt::format("range '{}' holds no whole number of sequences of {} (--seq)", item, seq));
      if (hi - lo >= kMaxValues)
        throw InputError({}, flag,
                         fmt::format("range '{}' is too wide ({} batches of {} tokens; at most {})",
                                     item, hi - lo + 1, seq, kMaxValues));
      for (int64_t g = lo; g <= hi; ++g) out.push_back(g);
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

std::vector<int> parse_int_set(const std::string& text, const std::string& flag) {
  return parse_set<int>(text, flag, 100000, /*positive=*/flag != "--zero");
}

std::vector<int> parse_int_set(const std::string& text, const std::string& flag, int max_width,
                               bool positive) {
  return parse_set<int>(text, flag, max_width, positive);
}

void add_search_flags(CLI::App& cmd, SearchFlags& f) {
  add_spec_options(cmd, f.spec);
  add_resilience_options(cmd, f.spec);
  const char* g = "Search space (pins narrow it: 8, 2,4,8 or 4-16)";
  cmd.add_option("--tp", f.tp, "Tensor-parallel sizes")->group(g);
  cmd.add_option("--pp", f.pp, "Pipeline-parallel sizes")->group(g);
  cmd.add_option("--cp", f.cp, "Context-parallel sizes")->group(g);
  cmd.add_option("--ep", f.ep, "Expert-parallel sizes")->group(g);
  cmd.add_option("--etp", f.etp, "Expert tensor-parallel sizes")->group(g);
  cmd.add_option("--vpp", f.vpp, "Virtual pipeline stages")->group(g);
  cmd.add_option("--mbs", f.mbs, "Micro-batch sizes (default 1,2,4,8,16)")->group(g);
  cmd.add_option("--zero", f.zero, "ZeRO stages (default 0-3)")->group(g);
  cmd.add_option("--recompute", f.recompute, "none,selective,full (default all)")->group(g);
  cmd.add_option("--schedule", f.schedule, "Pipeline schedules (default all registered)")->group(g);
  cmd.add_option("--sp", f.sp, "Sequence parallelism: auto (with TP), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->group(g);
  const char* wg = "Workload";
  cmd.add_option("--gbs,--global-batch-size", f.gbs,
                 "Global batch (sequences): 1536, a list 1024,2048 or a range 512-2048; with "
                 "several, step time and cost are ranked per token")
      ->group(wg);
  cmd.add_option("--gbs-tokens", f.gbs_tokens,
                 "Global batch in tokens (whole sequences of --seq): a value, list or range")
      ->excludes("--gbs")
      ->group(wg);
  cmd.add_option("--seq,--seq-length", f.seq, "Sequence length")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str()
      ->group(wg);
  cmd.add_option("--precision", f.precision, "Training precision")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8"}))
      ->capture_default_str()
      ->group(wg);
  cmd.add_option("--fp8-recipe", f.fp8_recipe,
                 "FP8 scaling recipe (Megatron --fp8-recipe; default delayed)")
      ->check(CLI::IsMember({"delayed", "tensorwise", "mxfp8", "blockwise"}))
      ->group(wg);
  cmd.add_option("--fp8-amax-history-len", f.fp8_amax_history_len,
                 "Amax history of delayed scaling (Megatron default 1)")
      ->check(CLI::Range(1, 1 << 20))
      ->group(wg);
  const char* tg = "Time to train";
  cmd.add_option("--train-tokens", f.train_tokens,
                 "Tokens to train: adds each plan's time to train (days)")
      ->check(finite_range(1.0, 1e18))
      ->group(tg);
  cmd.add_option("--deadline-days", f.deadline_days,
                 "With --train-tokens: the fewest GPUs (whole nodes) whose best plan trains them "
                 "within this many days; without --gpus the ranking is on that count")
      ->check(finite_range(1e-3, 1e5))
      ->group(tg);
  cmd.add_option("--budget-gpu-hours", f.budget_gpu_hours,
                 "With --train-tokens: the fastest training within this many GPU-hours, on whole "
                 "nodes; without --gpus the ranking is on that count")
      ->check(finite_range(1.0, 1e12))
      ->excludes("--deadline-days")
      ->group(tg);
  cmd.add_option("--max-gpus", f.max_gpus,
                 "With --deadline-days or --budget-gpu-hours: the largest GPU count to consider "
                 "(default: the "
                 "cluster YAML's size, or 1048576)")
      ->check(CLI::Range(1, 1 << 20))
      ->group(tg);
  cmd.add_flag("--distinct", f.distinct,
               "Rank the best plan of each distinct TP/PP/CP/EP/ZeRO/recompute layout first, then "
               "the near-duplicates (the default, in text, JSON and reports alike)");
  cmd.add_flag("--no-distinct", f.no_distinct, "The plain ranking, near-duplicates included")
      ->excludes("--distinct");
  cmd.add_option("--top", f.top, "How many plans to rank")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd.add_option("--objective", f.objective, "step_time | cost | mfu | memory")
      ->check(CLI::IsMember(objective_names()))
      ->capture_default_str();
  cmd.add_option("--memory-margin", f.margin, "Share of HBM kept free")
      ->check(finite_range(0.0, 0.9))
      ->capture_default_str();
  cmd.add_option("--framework", f.framework,
                 "Refuse what this framework cannot express: megatron, deepspeed or torchtitan; "
                 "or a framework profile NAME[@VERSION] (dtplan list frameworks): its kernels, "
                 "efficiency and defaults, and its stack's rules")
      ->capture_default_str();
  cmd.add_flag("--allow-cross-node-tp", f.cross_node_tp, "Allow TP beyond the NVLink domain");
  cmd.add_flag("--no-prune", f.no_prune,
               "Estimate every plan that fits in full instead of skipping those whose floor "
               "cannot enter the top K or the Pareto front (same results, slower)");
  cmd.add_option("--threads", f.threads, "Search threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
}

bool no_spec_given(const CLI::App& cmd) {
  return cmd.count("--model") + cmd.count("--cluster") + cmd.count("--gpus") == 0;
}

void apply_builtin_example(SearchFlags& f) {
  f.spec.model = "gpt3-175b";
  f.spec.cluster = "dgx-a100-80g";
  f.spec.gpus = 256;
  if (f.gbs.empty() && f.gbs_tokens.empty()) f.gbs = "1536";
}

SearchSetup make_search_setup(const SearchFlags& f) {
  SearchSetup s;
  s.model = load_model(f.spec.model);
  if (f.deadline_days > 0 && f.train_tokens <= 0)
    throw InputError({}, "--deadline-days", "needs --train-tokens (what to train by then)");
  if (f.budget_gpu_hours > 0 && f.train_tokens <= 0)
    throw InputError({}, "--budget-gpu-hours", "needs --train-tokens (what the budget trains)");
  if (f.max_gpus > 0 && f.deadline_days <= 0 && f.budget_gpu_hours <= 0)
    throw InputError({}, "--max-gpus", "applies to --deadline-days and --budget-gpu-hours");
  // With a deadline or a budget and no GPU count, the count is the answer: one node stands in
  // until then.
  const bool count_is_answer = (f.deadline_days > 0 || f.budget_gpu_hours > 0) && f.spec.gpus == 0;
  if (count_is_answer) {
    // A cluster YAML gives its size (the most the answer may use); a hardware profile one node
    // until the answer is known.
    try {
      s.cluster = load_cluster(f.spec.cluster, 0);
    } catch (const InputError& e) {
      if (e.field() != "--gpus") throw;
      const HardwareProfile hp = load_profile(f.spec.cluster);
      s.cluster = load_cluster(f.spec.cluster, hp.node.gpus_per_node);
    }
  } else {
    s.cluster = load_cluster(f.spec.cluster, f.spec.gpus);
  }
  Workload& w = s.workload;
  w.train_tokens = f.train_tokens;
  w.seq_len = f.seq;
  // A --from file can hold any text here; the flag's own check only sees the command line.
  const std::optional<Precision> precision = parse_precision(f.precision);
  if (!precision)
    throw InputError({}, "--precision",
                     fmt::format("unknown precision '{}'; known: bf16, fp16, fp8", f.precision));
  w.precision = *precision;
  {
    std::vector<Violation> v;
    s.failure = apply_job_options(f.spec, f.precision, s.cluster, v);
    apply_fp8_options(f.fp8_recipe, f.fp8_amax_history_len, s.cluster.profile, w, v);
    if (!v.empty()) throw InputError({}, v.front().flag, v.front().reason);
  }
  SearchSpace& space = s.space;
  space.gbs = parse_global_batches(f.gbs, f.gbs_tokens, f.seq);
  for (int64_t g : space.gbs)
    if (g > (int64_t{1} << 40))
      throw InputError({}, f.gbs_tokens.empty() ? "--gbs" : "--gbs-tokens",
                       fmt::format("{} sequences is more than 2^40", g));
  std::sort(space.gbs.begin(), space.gbs.end());
  space.gbs.erase(std::unique(space.gbs.begin(), space.gbs.end()), space.gbs.end());
  if (space.gbs.empty()) space.gbs.push_back(1536);
  // The workload's batch: the largest searched (the one reports and single-plan tools use).
  w.global_batch = space.gbs.back();
  space.tp = parse_int_set(f.tp, "--tp");
  space.pp = parse_int_set(f.pp, "--pp");
  space.cp = parse_int_set(f.cp, "--cp");
  space.ep = parse_int_set(f.ep, "--ep");
  space.etp = parse_int_set(f.etp, "--etp");
  space.vpp = parse_int_set(f.vpp, "--vpp");
  space.mbs = parse_int_set(f.mbs, "--mbs");
  space.zero = parse_int_set(f.zero, "--zero");
  for (int z : space.zero)
    if (z > 3) throw InputError({}, "--zero", fmt::format("ZeRO stage {} does not exist (0-3)", z));
  for (const auto& r : split(f.recompute)) {
    if (r == "none")
      space.recompute.push_back(Recompute::kNone);
    else if (r == "selective")
      space.recompute.push_back(Recompute::kSelective);
    else if (r == "full")
      space.recompute.push_back(Recompute::kFull);
    else
      throw InputError({}, "--recompute", fmt::format("'{}' is not none, selective or full", r));
  }
  const auto names = schedule_names();
  for (const auto& sch : split(f.schedule)) {
    if (std::find(names.begin(), names.end(), sch) == names.end())
      throw InputError({}, "--schedule",
                       fmt::format("unknown schedule '{}'{}", sch,
                                   did_you_mean(sch, std::span<const std::string>(names))));
    space.schedules.push_back(sch);
  }
  if (f.sp != "auto") space.sp = f.sp == "on";
  // Pins that no layout of this model can take are refused by name (the search dropped them:
  // a new-user trial's --ep 2 on a dense model, --schedule zb-v on one stage, --sp on at TP1).
  auto only = [](const std::vector<int>& pins, int v) {
    return !pins.empty() && std::all_of(pins.begin(), pins.end(), [&](int x) { return x == v; });
  };
  auto lacks = [](const std::vector<int>& pins, int v) {
    return !pins.empty() && std::find(pins.begin(), pins.end(), v) == pins.end();
  };
  if (!s.model.moe && (lacks(space.ep, 1) || lacks(space.etp, 1)))
    throw InputError({}, lacks(space.ep, 1) ? "--ep" : "--etp",
                     fmt::format("'{}' asks for expert parallelism, and {} is dense (no experts)",
                                 lacks(space.ep, 1) ? f.ep : f.etp, s.model.name));
  if (space.sp.value_or(false) && only(space.tp, 1))
    throw InputError({}, "--sp", "on needs a TP group: --tp is 1");
  if (!space.schedules.empty() && only(space.pp, 1))
    throw InputError({}, "--schedule",
                     fmt::format("'{}' orders a pipeline, and --pp is 1", f.schedule));
  SearchOptions& opt = s.options;
  const auto& objs = objective_names();
  const auto it = std::find(objs.begin(), objs.end(), f.objective);
  if (it == objs.end())
    throw InputError({}, "--objective", fmt::format("'{}' is not an objective", f.objective));
  opt.objective = static_cast<Objective>(it - objs.begin());
  opt.top_k = f.top;
  opt.memory_margin = f.margin;
  // --framework: a rule set, or a framework profile whose kernels and efficiency price every
  // plan and whose defaults every plan starts from (--fp8-recipe, when given, wins).
  if (std::optional<FrameworkProfile> fp = framework_profile_of(f.framework)) {
    FrameworkPlanGiven given;
    given.fp8_recipe = !f.fp8_recipe.empty();
    apply_framework_defaults(*fp, given, opt.base_plan, w);
    check_profile_fp8_recipe(fp->name, w, s.cluster.profile);
    // The profile's TP-overlap default as given: each layout asks for SP and TP > 1 itself
    // (layout_plan), which the base plan (TP 1, no SP) cannot show.
    if (fp->tp_comm_overlap) opt.base_plan.tp_comm_overlap = *fp->tp_comm_overlap;
    apply_framework_profile(*fp, s.cluster.profile);
    for (DeviceGroup& d : s.cluster.groups) apply_framework_profile(*fp, d.profile);
    const std::optional<Framework> rules = profile_rules(*fp);
    opt.framework = rules.value_or(Framework::kMegatron);
    opt.framework_rules = rules.has_value();
    s.framework_stack = fp->stack;
  } else {
    opt.framework = parse_framework(f.framework);
    s.framework_stack = framework_name(opt.framework);
  }
  // Who writes the ranked plans' checkpoints: the framework's checkpoint code.
  s.failure.writers = checkpoint_writers_of_stack(s.framework_stack);
  opt.allow_cross_node_tp = f.cross_node_tp;
  opt.prune = !f.no_prune;
  opt.threads = f.threads;
  return s;
}

bool distinct_ranking(const SearchFlags& f) { return !f.no_distinct; }

std::vector<FrameworkWarning> search_framework_warnings(const SearchSetup& s, const Plan& p) {
  if (!s.options.framework_rules) return {};
  std::vector<FrameworkWarning> w = framework_warnings(s.options.framework, p, s.model);
  // What `dtplan launch --format <framework>` would refuse: the search's rules are about the
  // layout, the emitter's also about the model (rope scaling, biases, ...) and the GPU count.
  const char* format = framework_name(s.options.framework);
  if (const std::string why = partial_node_refusal(s.cluster);
      !s.cluster.heterogeneous() && !why.empty())
    w.push_back({"launch-refused", "dtplan launch would refuse --gpus: " + why});
  if (const IEmitter* e = find_emitter(format); e && !s.cluster.heterogeneous()) {
    EmitInput in;
    in.model = &s.model;
    in.cluster = &s.cluster;
    in.work = &s.workload;
    in.plan = &p;
    std::string why;
    try {
      why = e->refusal(in);
    } catch (const InputError& x) {
      why = x.what();
    }
    if (!why.empty())
      w.push_back(
          {"launch-refused",
           fmt::format("dtplan launch --format {} would refuse this plan: {}", format, why)});
  }
  return w;
}

void widen_for_distinct(SearchSetup& s, const SearchFlags& f) {
  s.options.top_k = std::max(8 * f.top, 64);
}

std::string recorded_spec(const std::string& given) {
  std::error_code ec;
  if (given.empty() || !std::filesystem::is_regular_file(given, ec)) return given;
  const std::filesystem::path abs = std::filesystem::absolute(given, ec);
  return ec ? given : abs.lexically_normal().string();
}

std::string recorded_spec_from(const std::string& recorded, const std::string& search_file) {
  std::error_code ec;
  const std::filesystem::path r(recorded);
  if (recorded.empty() || r.is_absolute() || std::filesystem::exists(r, ec)) return recorded;
  const std::filesystem::path beside = std::filesystem::path(search_file).parent_path() / r;
  return std::filesystem::is_regular_file(beside, ec) ? beside.lexically_normal().string()
                                                      : recorded;
}

namespace {

// The flags a search ran with, as its JSON records them (`flags`): `report --from` reads them
// back; recorded_flags(SearchFlags{}, "") is what unset flags record. `gbs` is the batch pin as
// applied.
nlohmann::json recorded_flags(const SearchFlags& f, const std::string& gbs) {
  return {{"model", recorded_spec(f.spec.model)},
          {"cluster", recorded_spec(f.spec.cluster)},
          {"gpus", f.spec.gpus},
          {"tp", f.tp},
          {"pp", f.pp},
          {"cp", f.cp},
          {"ep", f.ep},
          {"etp", f.etp},
          {"vpp", f.vpp},
          {"mbs", f.mbs},
          {"zero", f.zero},
          {"recompute", f.recompute},
          {"schedule", f.schedule},
          {"sp", f.sp},
          {"objective", f.objective},
          {"framework", f.framework},
          {"precision", f.precision},
          {"gbs", gbs},
          {"gbs_tokens", f.gbs_tokens},
          {"seq", f.seq},
          {"top", f.top},
          {"memory_margin", f.margin},
          {"allow_cross_node_tp", f.cross_node_tp},
          {"distinct", distinct_ranking(f)},  // as applied (the default is distinct)
          {"no_distinct", f.no_distinct},
          {"train_tokens", f.train_tokens},
          {"deadline_days", f.deadline_days},
          {"budget_gpu_hours", f.budget_gpu_hours},
          {"max_gpus", f.max_gpus},
          // The job beyond its step (add_resilience_options), so that `report --from`
          // prices checkpoints and failures as the search did.
          {"loader_tokens_per_s_per_node", f.spec.loader_tokens_per_s_per_node},
          {"async_save", f.spec.async_save},
          {"restart_s", f.spec.restart_s},
          {"checkpoint_interval_s", f.spec.checkpoint_interval_s},
          {"mtbf_per_gpu_hours", f.spec.mtbf_per_gpu_hours},
          {"skipped_steps", f.spec.skipped_step_fraction},
          {"straggler_fraction", f.spec.straggler_fraction},
          {"straggler_factor", f.spec.straggler_factor}};
}

// The recorded flags that pass back through their flags' own checks (check_json_as_flags).
constexpr std::pair<const char*, const char*> kRecordedFlags[] = {
    {"gpus", "--gpus"},
    {"tp", "--tp"},
    {"pp", "--pp"},
    {"cp", "--cp"},
    {"ep", "--ep"},
    {"etp", "--etp"},
    {"vpp", "--vpp"},
    {"mbs", "--mbs"},
    {"zero", "--zero"},
    {"recompute", "--recompute"},
    {"schedule", "--schedule"},
    {"sp", "--sp"},
    {"objective", "--objective"},
    {"precision", "--precision"},
    {"gbs_tokens", "--gbs-tokens"},
    {"seq", "--seq"},
    {"top", "--top"},
    {"memory_margin", "--memory-margin"},
    {"allow_cross_node_tp", "--allow-cross-node-tp"},
    {"no_distinct", "--no-distinct"},
    {"train_tokens", "--train-tokens"},
    {"deadline_days", "--deadline-days"},
    {"budget_gpu_hours", "--budget-gpu-hours"},
    {"max_gpus", "--max-gpus"},
    {"loader_tokens_per_s_per_node", "--loader-tokens-per-s-per-node"},
    {"async_save", "--async-save"},
    {"restart_s", "--restart-s"},
    {"checkpoint_interval_s", "--checkpoint-interval-s"},
    {"mtbf_per_gpu_hours", "--mtbf-per-gpu-hours"},
    {"skipped_steps", "--skipped-steps"},
    {"straggler_fraction", "--straggler-fraction"},
    {"straggler_factor", "--straggler-factor"}};

}  // namespace

nlohmann::json search_to_json(const SearchFlags& f, const SearchSetup& s, const SearchResult& r,
                              const char* evaluator, int refined_with_des) {
  const double gib = units::kGiB;
  nlohmann::json j;
  j["model"] = s.model.name;
  j["cluster"] = {{"profile", s.cluster.profile.name}, {"gpus", s.cluster.num_gpus}};
  if (s.cluster.heterogeneous()) {
    // `profile` is the first group's; the groups say what the plans run on.
    j["cluster"]["file"] = s.cluster.file;
    j["cluster"]["groups"] = nlohmann::json::array();
    for (int g = 0; g < s.cluster.groups_used(); ++g)
      j["cluster"]["groups"].push_back(
          {{"profile", s.cluster.groups[static_cast<size_t>(g)].profile.name},
           {"gpu", s.cluster.groups[static_cast<size_t>(g)].profile.gpu.name},
           {"nodes", (s.cluster.group_first_rank(g + 1) - s.cluster.group_first_rank(g) +
                      s.cluster.profile.node.gpus_per_node - 1) /
                         s.cluster.profile.node.gpus_per_node},
           {"first_rank", s.cluster.group_first_rank(g)},
           {"gpus", s.cluster.group_first_rank(g + 1) - s.cluster.group_first_rank(g)},
           {"memory_gib", s.cluster.groups[static_cast<size_t>(g)].profile.gpu.memory_gib}});
  }
  j["workload"] = {
      {"seq", s.workload.seq_len}, {"gbs", s.workload.global_batch}, {"precision", f.precision}};
  if (s.space.gbs.size() > 1) {
    j["workload"]["gbs_searched"] = {
        {"count", s.space.gbs.size()}, {"min", s.space.gbs.front()}, {"max", s.space.gbs.back()}};
  }
  j["ranked_per_token"] = r.per_token;
  j["objective"] = f.objective;
  j["evaluator"] = evaluator;
  // How many of the top plans the simulator re-ranked (their figures are simulated).
  j["refine"] = refined_with_des;  // --refine K: plans re-ranked by the simulator
  const auto refined =
      std::count_if(r.top.begin(), r.top.end(), [](const Candidate& c) { return c.refined; });
  j["refined_with_des"] = refined;  // of the ranked plans shown
  j["framework"] = f.framework;
  j["flags"] = recorded_flags(
      f, f.gbs_tokens.empty() ? (f.gbs.empty() ? std::to_string(s.workload.global_batch) : f.gbs)
                              : std::string());
  j["stats"] = {{"enumerated", r.enumerated}, {"evaluated", r.evaluated},
                {"feasible", r.feasible},     {"exhausted", r.exhausted},
                {"elapsed_s", r.elapsed_s},   {"plans_per_s", r.plans_per_s()},
                {"threads", r.threads}};
  nlohmann::json rej = nlohmann::json::array();
  for (int k = 0; k < kNumRejections; ++k)
    if (r.rejected[static_cast<size_t>(k)] > 0)
      rej.push_back({{"reason", describe(static_cast<Rejection>(k))},
                     {"count", r.rejected[static_cast<size_t>(k)]},
                     {"example", r.example[static_cast<size_t>(k)]}});
  j["rejected"] = rej;
  j["top"] = nlohmann::json::array();
  for (size_t i = 0; i < r.top.size(); ++i) {
    Resolved res{s.model, s.cluster, s.workload, r.top[i].plan, s.framework_stack, s.failure};
    nlohmann::json cj = estimate_to_json(res, r.top[i].estimate, FlopsConvention::kCausalHalf);
    cj["rank"] = static_cast<int>(i + 1);
    cj["evaluator"] = r.top[i].refined ? "des" : evaluator;
    cj["objective_value"] = r.top[i].objective;
    j["top"].push_back(cj);
  }
  // The warnings of the first plan, once: its framework's (as estimate gives them), then those
  // of its numbers (reports/uncertainty.h).
  j["warnings"] = nlohmann::json::array();
  if (!r.top.empty()) {
    for (const FrameworkWarning& w : search_framework_warnings(s, r.top.front().plan))
      j["warnings"].push_back({{"code", w.code}, {"message", w.message}});
    const Uncertainty u = uncertainty_of(s.model, s.cluster, s.workload, r.top.front().plan,
                                         r.top.front().estimate, s.framework_stack);
    for (const NumberWarning& w : u.warnings)
      j["warnings"].push_back({{"code", w.code}, {"message", w.message}});
  }
  j["pareto"] = nlohmann::json::array();
  for (const auto& c : r.pareto)
    j["pareto"].push_back({{"layout", c.plan.describe()},
                           {"step_time_s", c.estimate.step_time_s},
                           {"peak_memory_gib", c.estimate.memory_peak.total_bytes() / gib}});
  return j;
}

void check_json_integers(const nlohmann::json& v, const std::string& path,
                         const std::vector<std::string>& large, const std::string& at) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(std::abs(d) <= 2147483647.0))
      throw InputError(
          {path, 0, 0}, "--from",
          fmt::format("{}: the number {} is out of range here", at.empty() ? "/" : at, v.dump()));
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      if (std::find(large.begin(), large.end(), it.key()) == large.end())
        check_json_integers(it.value(), path, large, at + "/" + it.key());
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i)
      check_json_integers(v[i], path, large, fmt::format("{}/{}", at, i));
  }
}

SearchFlags search_flags_from_json(const std::string& path) {
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
  if (!j.is_object() || !j.contains("top") || !j.contains("model"))
    throw InputError({path, 0, 0}, "--from", "not a `dtplan search --json` result");
  // The parts read below hold integers, and a few large floats under their own names.
  const std::vector<std::string> large = {"train_tokens",
                                          "budget_gpu_hours",
                                          "deadline_days",
                                          "memory_margin",
                                          "loader_tokens_per_s_per_node",
                                          "restart_s",
                                          "checkpoint_interval_s",
                                          "mtbf_per_gpu_hours",
                                          "skipped_steps",
                                          "straggler_fraction",
                                          "straggler_factor"};
  if (j.contains("flags")) check_json_integers(j["flags"], path, large, "/flags");
  if (j.contains("cluster")) check_json_integers(j["cluster"], path, large, "/cluster");
  if (j.contains("workload")) check_json_integers(j["workload"], path, large, "/workload");
  SearchFlags f;
  if (j.contains("flags")) {
    if (!j["flags"].is_object())
      throw InputError({path, 0, 0}, "--from", "/flags: expected the search's recorded flags");
    // Every recorded value that is not an unset flag's passes its flag's own checks.
    const nlohmann::json defaults = recorded_flags(SearchFlags{}, "");
    SearchFlags scratch;
    check_json_as_flags(
        j["flags"], path, "/flags", kRecordedFlags,
        [&](CLI::App& a) {
          scratch = SearchFlags{};
          add_search_flags(a, scratch);
        },
        &defaults);
  }
  try {
    if (j.contains("flags")) {
      const auto& g = j["flags"];
      f.spec.model = recorded_spec_from(g.at("model"), path);
      f.spec.cluster = recorded_spec_from(g.at("cluster"), path);
      f.spec.gpus = g.at("gpus");
      f.tp = g.at("tp");
      f.pp = g.at("pp");
      f.cp = g.at("cp");
      f.ep = g.at("ep");
      f.etp = g.at("etp");
      f.vpp = g.at("vpp");
      f.mbs = g.at("mbs");
      f.zero = g.at("zero");
      f.recompute = g.at("recompute");
      f.schedule = g.at("schedule");
      f.sp = g.at("sp");
      f.objective = g.at("objective");
      f.framework = g.at("framework");
      f.precision = g.at("precision");
      // Older files record one batch as a number; newer ones the pin as given.
      const auto& gbs = g.at("gbs");
      f.gbs = gbs.is_string() ? gbs.get<std::string>() : std::to_string(gbs.get<int64_t>());
      f.gbs_tokens = g.value("gbs_tokens", std::string());
      f.seq = g.at("seq");
      f.top = g.at("top");
      f.margin = g.at("memory_margin");
      f.cross_node_tp = g.at("allow_cross_node_tp");
      f.train_tokens = g.value("train_tokens", 0.0);
      f.distinct = g.value("distinct", false);
      f.no_distinct = g.value("no_distinct", false);
      f.deadline_days = g.value("deadline_days", 0.0);
      f.budget_gpu_hours = g.value("budget_gpu_hours", 0.0);
      f.max_gpus = g.value("max_gpus", 0);
      // The resilience flags (files before 2026-12-04 have none: the defaults).
      const SpecOptions none;
      f.spec.loader_tokens_per_s_per_node =
          g.value("loader_tokens_per_s_per_node", none.loader_tokens_per_s_per_node);
      f.spec.async_save = g.value("async_save", none.async_save);
      f.spec.restart_s = g.value("restart_s", none.restart_s);
      f.spec.checkpoint_interval_s = g.value("checkpoint_interval_s", none.checkpoint_interval_s);
      f.spec.mtbf_per_gpu_hours = g.value("mtbf_per_gpu_hours", none.mtbf_per_gpu_hours);
      f.spec.skipped_step_fraction = g.value("skipped_steps", none.skipped_step_fraction);
      f.spec.straggler_fraction = g.value("straggler_fraction", none.straggler_fraction);
      f.spec.straggler_factor = g.value("straggler_factor", none.straggler_factor);
    } else {  // older files: no pins recorded, the whole space is searched
      f.spec.model = j.at("model");
      f.spec.cluster = j.at("cluster").at("profile");
      f.spec.gpus = j.at("cluster").at("gpus");
      f.seq = j.at("workload").at("seq");
      f.gbs = std::to_string(j.at("workload").at("gbs").get<int64_t>());
      f.precision = j.at("workload").at("precision");
      f.objective = j.value("objective", std::string("step_time"));
      f.framework = j.value("framework", std::string("megatron"));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError({path, 0, 0}, "--from", fmt::format("incomplete search result: {}", e.what()));
  }
  return f;
}

}  // namespace dtplan::cli
