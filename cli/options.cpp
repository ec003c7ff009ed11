#include "cli/options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>

#include "core/atomic_file.h"
#include "core/error.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/reliability.h"

namespace dtplan::cli {

void add_spec_options(CLI::App& app, SpecOptions& o) {
  app.add_option("--model,-m", o.model, "Model zoo name (dtplan list models) or a model YAML path")
      ->capture_default_str();
  app.add_option("--cluster,-c", o.cluster,
                 "Hardware profile name/path (with --gpus) or a cluster YAML path")
      ->capture_default_str();
  app.add_option("--gpus,-g", o.gpus, "Number of GPUs (with a hardware profile)")
      ->check(CLI::Range(1, 1 << 22));
}

CLI::Validator finite_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        double x = 0;
        try {
          size_t used = 0;
          x = std::stod(v, &used);
          if (used != v.size()) return "'" + v + "' is not a number";
        } catch (const std::exception&) {
          return "'" + v + "' is not a number";
        }
        if (!std::isfinite(x) || x < lo || x > hi)
          return fmt::format("{} is not in [{:g}, {:g}]", v, lo, hi);
        return "";
      },
      fmt::format("in [{:g}, {:g}]", lo, hi));
}

void check_json_as_flags(const nlohmann::json& obj, const std::string& path,
                         const std::string& pointer, JsonFlagKeys keys,
                         const std::function<void(CLI::App&)>& add,
                         const nlohmann::json* defaults) {
  for (const auto& entry : keys) {
    // Named copies, not structured bindings: clang before 16 cannot capture those in a lambda.
    const char* const key = entry.first;
    const char* const flag = entry.second;
    if (!obj.contains(key)) continue;
    const nlohmann::json& v = obj[key];
    if (defaults && defaults->contains(key) && (*defaults)[key] == v) continue;
    if (v.is_string() && v.get<std::string>().empty()) continue;  // what an unset option records
    const std::string at = pointer + "/" + key;
    auto refuse = [&](const std::string& why) {
      throw InputError({path, 0, 0}, "--from",
                       why.rfind(flag, 0) == 0
                           ? fmt::format("{}: {}", at, why)
                           : fmt::format("{}: {} (as {} takes it)", at, why, flag));
    };
    CLI::App scratch;
    add(scratch);
    const CLI::Option* opt = scratch.get_option_no_throw(flag);
    if (!opt) refuse("no such flag");  // a table naming a flag its command does not have
    std::vector<std::string> args{flag};
    if (opt->get_expected_max() == 0) {  // a flag without a value
      if (!v.is_boolean()) refuse(fmt::format("{} is not true or false", v.dump()));
      if (!v.get<bool>()) continue;
    } else if (v.is_string()) {
      args.push_back(v.get<std::string>());
    } else if (v.is_number_integer() || v.is_number_unsigned()) {
      args.push_back(v.dump());
    } else if (v.is_number_float()) {
      args.push_back(fmt::format("{:.17g}", v.get<double>()));
    } else {
      refuse(fmt::format("{} is not a value the flag takes", v.dump()));
    }
    // CLI11 parses the arguments back to front.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
      scratch.parse(reversed);
    } catch (const CLI::ParseError& e) {
      refuse(e.what());
    }
  }
}

void add_checkpoint_options(CLI::App& app, SpecOptions& o) {
  const char* g = "Checkpoints, failures and data (docs/resilience.md)";
  app.add_flag("--async-save", o.async_save,
               "Checkpoints block only for the device-to-host copy (Megatron --async-save)")
      ->group(g);
  app.add_option("--restart-s", o.restart_s,
                 "A restart's whole time (default: detection + requeue + start-up + checkpoint "
                 "load + fast-forward)")
      ->check(finite_range(0.0, 1e9))
      ->group(g);
  app.add_option(
         "--mtbf-per-gpu-hours", o.mtbf_per_gpu_hours,
         "Mean time between failures of one GPU, hours (job MTBF = this / GPUs; "
         "default: the cluster YAML's or the profile's reliability, else Llama 3's 50,700 h)")
      ->check(finite_range(1.0, 1e12))
      ->group(g);
  app.add_option("--checkpoint-interval-s", o.checkpoint_interval_s,
                 "Checkpoint every this many seconds (default: Young's optimum)")
      ->check(finite_range(1.0, 1e9))
      ->group(g);
}

void add_resilience_options(CLI::App& app, SpecOptions& o) {
  const char* g = "Checkpoints, failures and data (docs/resilience.md)";
  app.add_option("--loader-tokens-per-s-per-node", o.loader_tokens_per_s_per_node,
                 "Tokens/s one node's data loader delivers (default: the cluster's loader: "
                 "pre-tokenized reads at the storage rate)")
      ->check(finite_range(1.0, 1e15))
      ->group(g);
  add_checkpoint_options(app, o);
  app.add_option("--straggler-fraction", o.straggler_fraction,
                 "Share of GPUs slow at any step (closed form: the step waits for the slowest)")
      ->check(finite_range(0.0, 1.0))
      ->group(g);
  app.add_option("--straggler-factor", o.straggler_factor,
                 "How many times longer a straggler's kernels take (default 1.2)")
      ->check(finite_range(1.0, 1000.0))
      ->group(g);
  app.add_option("--skipped-steps", o.skipped_step_fraction,
                 "Share of steps skipped by fp16 loss scaling on overflow (a goodput term)")
      ->check(finite_range(0.0, 0.5))
      ->group(g);
}

void add_plan_options(CLI::App& app, PlanOptions& o) {
  const char* g = "Plan (Megatron-LM flag names)";
  app.add_option("--tp", o.tp, "Tensor-parallel size")->check(CLI::Range(1, 1024))->group(g);
  app.add_option("--pp", o.pp, "Pipeline-parallel size")->check(CLI::Range(1, 1024))->group(g);
  app.add_option("--dp", o.dp, "Data-parallel size (default: GPUs / (tp*pp*cp))")
      ->check(CLI::Range(1, 1 << 22))
      ->group(g);
  app.add_option("--cp", o.cp, "Context-parallel size")->check(CLI::Range(1, 1024))->group(g);
  app.add_option("--ep", o.ep, "Expert-parallel size")->check(CLI::Range(1, 4096))->group(g);
  app.add_option("--etp", o.etp,
                 "Expert tensor-parallel size (default: 1, as MoE recipes set it; Megatron-LM's "
                 "own default is tp, arguments.py:587 @d98e8a6, so launch writes the value)")
      ->check(CLI::Range(1, 1024))
      ->group(g);
  app.add_option("--vpp", o.vpp, "Virtual pipeline stages per pipeline rank")
      ->check(CLI::Range(1, 256))
      ->group(g);
  app.add_flag("--sp,--sequence-parallel", o.sp, "Sequence parallelism (needs tp > 1)")->group(g);
  app.add_option("--zero", o.zero, "0 none, 1 distributed optimizer, 2 +gradients, 3 +parameters")
      ->check(CLI::Range(0, 3))
      ->group(g);
  app.add_option("--recompute", o.recompute, "Activation recomputation")
      ->check(CLI::IsMember({"none", "selective", "full"}))
      ->capture_default_str()
      ->group(g);
  app.add_option("--recompute-layers", o.recompute_layers,
                 "With full recompute: layers recomputed in each model chunk (a stage, or each "
                 "virtual stage with --vpp; Megatron's --recompute-num-layers with "
                 "--recompute-method block; 0 = all)")
      ->check(CLI::Range(0, 100000))
      ->group(g);
  app.add_option("--cpu-offloading-num-layers", o.offload_layers,
                 "Offload the activations of the first N layers of each chunk to host memory "
                 "(Megatron-Core; 0 = none)")
      ->check(CLI::Range(0, 100000))
      ->group(g);
  app.add_option("--mbs,--micro-batch-size", o.mbs, "Micro-batch size (sequences)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str()
      ->group(g);
  app.add_option("--gbs,--global-batch-size", o.gbs, "Global batch (sequences)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->group(g);
  app.add_option("--gbs-tokens", o.gbs_tokens,
                 "Global batch in tokens (instead of --gbs; must be a multiple of --seq)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50))
      ->excludes("--gbs")
      ->group(g);
  app.add_option("--seq,--seq-length", o.seq, "Sequence length (tokens)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str()
      ->group(g);
  app.add_option("--schedule", o.schedule,
                 "Pipeline schedule (default 1f1b; interleaved with vpp>1)")
      ->check(CLI::IsMember(schedule_names()))
      ->group(g);
  app.add_option("--precision", o.precision, "Training precision")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8"}))
      ->capture_default_str()
      ->group(g);
  app.add_option("--fp8-recipe", o.fp8_recipe,
                 "FP8 scaling recipe (Megatron --fp8-recipe; default delayed): its weight "
                 "copies' scales and scaling state in the memory model")
      ->check(CLI::IsMember({"delayed", "tensorwise", "mxfp8", "blockwise"}))
      ->group(g);
  app.add_option("--fp8-amax-history-len", o.fp8_amax_history_len,
                 "Amax history of delayed scaling (Megatron default 1; Transformer Engine's "
                 "DelayedScaling default 1024)")
      ->check(CLI::Range(1, 1 << 20))
      ->group(g);
  app.add_flag("--uneven-pp", o.uneven_pp,
               "First and last pipeline chunks take fewer layers (chosen, with a note, when "
               "the layers do not divide by pp*vpp)")
      ->group(g);
  app.add_flag("--account-for-embedding-in-pipeline-split", o.account_for_embedding,
               "Count the embedding as one layer of the first pipeline chunk (Megatron-Core)")
      ->group(g);
  app.add_flag("--account-for-loss-in-pipeline-split", o.account_for_loss,
               "Count the output layer and loss as one layer of the last pipeline chunk "
               "(Megatron-Core)")
      ->group(g);
  app.add_option("--stage-split", o.stage_split,
                 "K:A - the first K pipeline stages hold A decoder layers each, the others an "
                 "equal share of the rest (Megatron-Core --pipeline-model-parallel-layout; for "
                 "device groups of different speeds: docs/heterogeneous.md)")
      ->group(g);
  CLI::Option* no_grad = app.add_flag("--no-overlap-grad-reduce", o.no_overlap_grad_reduce,
                                      "Do not overlap the gradient reduce with backward")
                             ->group(g);
  // The defaults, said explicitly: they win over a framework profile's `false` (--framework).
  app.add_flag("--overlap-grad-reduce", o.overlap_grad_reduce,
               "Overlap the gradient reduce with backward (the default; over a framework "
               "profile's default)")
      ->excludes(no_grad)
      ->group(g);
  CLI::Option* no_gather = app.add_flag("--no-overlap-param-gather", o.no_overlap_param_gather,
                                        "Do not overlap the parameter all-gather with forward")
                               ->group(g);
  app.add_flag("--overlap-param-gather", o.overlap_param_gather,
               "Overlap the parameter all-gather with forward (the default; over a framework "
               "profile's default)")
      ->excludes(no_gather)
      ->group(g);
  app.add_flag("--tp-comm-overlap", o.tp_comm_overlap, "Overlap TP communication with GEMMs")
      ->group(g);
  app.add_flag("--ep-comm-overlap", o.ep_comm_overlap, "Overlap EP all-to-all with compute")
      ->group(g);
  app.add_option("--moe-dispatcher", o.moe_dispatcher,
                 "MoE token dispatch: alltoall (one all-to-all), deepep or hybridep (Megatron's "
                 "flex dispatcher: a token crosses the network once per destination node)")
      ->check(CLI::IsMember({"alltoall", "deepep", "hybridep"}))
      ->capture_default_str()
      ->group(g);
  app.add_option("--rank-order", o.rank_order, "Rank order, innermost first")
      ->capture_default_str()
      ->group(g);
  app.add_option("--attention", o.attention,
                 "Attention kernel: flash (fused) or unfused (materialized s x s scores)")
      ->check(CLI::IsMember({"flash", "unfused"}))
      ->capture_default_str()
      ->group(g);
  app.add_option("--grads", o.grads,
                 "Gradient precision: fp32 main grads (Megatron, 18 B/param with Adam) or 16bit "
                 "(ZeRO/DeepSpeed, 16 B/param)")
      ->check(CLI::IsMember({"fp32", "16bit"}))
      ->capture_default_str()
      ->group(g);
  // As search's --train-tokens: at least one token (0 and 1e-300 printed "0.0 days").
  app.add_option("--train-tokens", o.train_tokens, "Training tokens, for time-to-train")
      ->check(finite_range(1.0, 1e18))
      ->group(g);
}

bool report_violations(const std::vector<Violation>& violations) {
  for (const auto& v : violations) fmt::print(stderr, "dtplan: error: {}: {}\n", v.flag, v.reason);
  return !violations.empty();
}

void write_output(const std::string& text, const std::string& out) {
  if (out.empty()) {
    fmt::print("{}", text);
    return;
  }
  write_file_atomic(out, text);
  fmt::print(stderr, "wrote {}\n", out);
}

void keep_given_resilience_flags(const CLI::App& cmd, const SpecOptions& given, SpecOptions& into) {
  auto given_on = [&](const char* flag) { return cmd.count(flag) > 0; };
  if (given_on("--loader-tokens-per-s-per-node"))
    into.loader_tokens_per_s_per_node = given.loader_tokens_per_s_per_node;
  if (given_on("--async-save")) into.async_save = given.async_save;
  if (given_on("--restart-s")) into.restart_s = given.restart_s;
  if (given_on("--mtbf-per-gpu-hours")) into.mtbf_per_gpu_hours = given.mtbf_per_gpu_hours;
  if (given_on("--checkpoint-interval-s")) into.checkpoint_interval_s = given.checkpoint_interval_s;
  if (given_on("--straggler-fraction")) into.straggler_fraction = given.straggler_fraction;
  if (given_on("--straggler-factor")) into.straggler_factor = given.straggler_factor;
  if (given_on("--skipped-steps")) into.skipped_step_fraction = given.skipped_step_fraction;
}

FailureOptions apply_job_options(const SpecOptions& s, const std::string& precision, Cluster& c,
                                 std::vector<Violation>& violations) {
  FailureOptions f;
  if (s.loader_tokens_per_s_per_node > 0) {
    ClusterServices sv = services_of(c);
    sv.data.tokens_per_s_per_node = s.loader_tokens_per_s_per_node;
    sv.data.source = "--loader-tokens-per-s-per-node";
    c.services = sv;
  }
  if (s.straggler_factor > 0 && !(s.straggler_fraction > 0))
    throw InputError({}, "--straggler-factor", "needs --straggler-fraction (how many are slow)");
  if (s.straggler_fraction > 0) {
    ClusterServices sv = services_of(c);
    sv.stragglers = {s.straggler_fraction, s.straggler_factor > 0 ? s.straggler_factor : 1.2};
    c.services = sv;
  }
  if (s.mtbf_per_gpu_hours > 0) {
    ClusterServices sv = services_of(c);
    sv.reliability.mtbf_per_gpu_hours = s.mtbf_per_gpu_hours;
    sv.reliability.source = "--mtbf-per-gpu-hours";
    c.services = sv;
  }
  f.async_save = s.async_save;
  if (s.restart_s >= 0) f.restart_s = s.restart_s;
  if (s.checkpoint_interval_s > 0) f.interval_s = s.checkpoint_interval_s;
  f.skipped_step_fraction = s.skipped_step_fraction;
  if (s.skipped_step_fraction > 0 && precision != "fp16")
    violations.push_back({"--skipped-steps",
                          "applies to --precision fp16 (steps skipped by dynamic loss scaling on "
                          "overflow; bf16 and fp8 skip none)"});
  return f;
}

namespace {
bool is_blackwell(const HardwareProfile& hw) {
  return hw.gpu.name.find('B') == 0 || hw.gpu.name.find("GB") == 0;
}
}  // namespace

void check_profile_fp8_recipe(const std::string& profile, const Workload& w,
                              const HardwareProfile& hw) {
  if (w.precision == Precision::kFp8 && w.fp8_recipe == Fp8Recipe::kMxfp8 && !is_blackwell(hw))
    throw InputError({}, "--framework",
                     fmt::format("profile '{}' defaults to the mxfp8 FP8 recipe, which needs "
                                 "Blackwell (B200, GB200, ...); {} has none: pass --fp8-recipe",
                                 profile, hw.gpu.name));
}

void apply_fp8_options(const std::string& recipe, int amax_history_len, const HardwareProfile& hw,
                       Workload& w, std::vector<Violation>& violations) {
  w.fp8_recipe = recipe == "tensorwise"  ? Fp8Recipe::kTensorwise
                 : recipe == "mxfp8"     ? Fp8Recipe::kMxfp8
                 : recipe == "blockwise" ? Fp8Recipe::kBlockwise
                                         : Fp8Recipe::kDelayed;
  w.fp8_amax_history_len = std::max(1, amax_history_len);
  if (w.precision != Precision::kFp8) {
    if (!recipe.empty()) violations.push_back({"--fp8-recipe", "applies to --precision fp8"});
    if (amax_history_len > 0)
      violations.push_back({"--fp8-amax-history-len", "applies to --precision fp8"});
  } else if (amax_history_len > 0 && w.fp8_recipe != Fp8Recipe::kDelayed) {
    violations.push_back(
        {"--fp8-amax-history-len",
         fmt::format("applies to the delayed recipe; {} keeps no amax history", recipe)});
  }
  if (w.fp8_recipe == Fp8Recipe::kMxfp8 && !is_blackwell(hw) && w.precision == Precision::kFp8)
    violations.push_back(
        {"--fp8-recipe", fmt::format("mxfp8 needs Blackwell (B200, GB200, ...); {} has none "
                                     "(Megatron transformer_config.py: 'mxfp8' for Blackwell "
                                     "architecture only)",
                                     hw.gpu.name)});
}

Resolved resolve(const SpecOptions& s, const PlanOptions& o, std::vector<Violation>& violations) {
  Resolved r;
  r.model = load_model(s.model);
  r.cluster = load_cluster(s.cluster, s.gpus);
  r.failure = apply_job_options(s, o.precision, r.cluster, violations);
  Workload& w = r.workload;
  w.seq_len = o.seq;
  if (const auto pr = parse_precision(o.precision))
    w.precision = *pr;
  else  // a --from file can hold any text; the flag's own check only sees the command line
    violations.push_back(
        {"--precision",
         fmt::format("unknown precision '{}'; known: bf16, fp16, fp8", o.precision)});
  apply_fp8_options(o.fp8_recipe, o.fp8_amax_history_len, r.cluster.profile, w, violations);
  w.train_tokens = o.train_tokens;
  Plan& p = r.plan;
  p.tp = o.tp;
  p.pp = o.pp;
  p.cp = o.cp;
  p.ep = o.ep;
  p.etp = o.etp > 0 ? o.etp : 1;
  p.vpp = o.vpp;
  p.sp = o.sp;
  p.zero = o.zero;
  p.recompute = o.recompute == "full"        ? Recompute::kFull
                : o.recompute == "selective" ? Recompute::kSelective
                                             : Recompute::kNone;
  p.recompute_layers = o.recompute_layers;
  p.offload_layers = o.offload_layers;
  p.mbs = o.mbs;
  const int model_parallel = o.tp * o.pp * o.cp;
  p.dp = o.dp > 0 ? o.dp : std::max(1, r.cluster.num_gpus / model_parallel);
  const bool dp_undefined = o.dp == 0 && r.cluster.num_gpus % model_parallel != 0;
  if (dp_undefined)
    violations.push_back({"--gpus", fmt::format("{} GPUs are not divisible by tp*pp*cp = {}",
                                                r.cluster.num_gpus, model_parallel)});
  w.global_batch = o.gbs > 0 ? o.gbs : 1536;
  if (o.gbs_tokens > 0) {
    if (o.gbs_tokens % o.seq != 0)
      violations.push_back({"--gbs-tokens", fmt::format("{} tokens are not a whole number of "
                                                        "sequences of {} tokens",
                                                        o.gbs_tokens, o.seq)});
    w.global_batch = std::max<int64_t>(1, o.gbs_tokens / o.seq);
  }
  p.gbs = w.global_batch;
  p.schedule = !o.schedule.empty() ? o.schedule : (o.vpp > 1 ? "interleaved" : "1f1b");
  p.uneven_pp = o.uneven_pp;
  p.account_for_embedding = o.account_for_embedding;
  p.account_for_loss = o.account_for_loss;
  if (!o.stage_split.empty()) {
    int k = 0, a = 0;
    char colon = 0, extra = 0;
    if (std::sscanf(o.stage_split.c_str(), "%d%c%d%c", &k, &colon, &a, &extra) != 3 ||
        colon != ':' || k < 1 || a < 1 || k > 1 << 10 || a > 1 << 16)
      violations.push_back({"--stage-split", fmt::format("'{}': expected K:A, two positive "
                                                         "integers (stages, layers each)",
                                                         o.stage_split)});
    else {
      p.split_stages = k;
      p.split_layers = a;
    }
  }
  // Layers that do not divide into the pipeline chunks: take the uneven split (the first and
  // last stages give up layers, as the Llama 3 paper's 126 layers on 16 stages: 7 / 8 x 14 / 7)
  // by default, and say so.
  const int chunks = p.pp * p.vpp;
  // Interleaved, Megatron-Core's --decoder-first/last-pipeline-num-layers must divide by vpp:
  // count the embedding and the loss as layers instead where that divides (as the search does),
  // else take the uneven split below, which the launch files write as a
  // --pipeline-model-parallel-layout.
  if (!p.uneven_pp && !p.account_for_embedding && !p.account_for_loss && p.vpp > 1 &&
      p.split_stages == 0 && r.model.layers % chunks != 0) {
    if ((r.model.layers + 2) % chunks == 0 && (r.model.layers + 2) / chunks >= 2) {
      p.account_for_embedding = p.account_for_loss = true;
      fmt::print(
          stderr,
          "dtplan: note: {} layers do not divide into pp*vpp = {} chunks; counting the "
          "embedding and the loss as layers ({} per chunk: "
          "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split)\n",
          r.model.layers, chunks, (r.model.layers + 2) / chunks);
    } else if (!uneven_split_exists(r.model.layers, p.pp, p.vpp)) {
      violations.push_back(
          {"--vpp", fmt::format("{} layers do not divide into pp*vpp = {} chunks, nor {} with the "
                                "embedding and loss counted, nor unevenly; interleaving needs "
                                "one of them",
                                r.model.layers, chunks, r.model.layers + 2)});
    }
  }
  if (!p.uneven_pp && !p.account_for_embedding && !p.account_for_loss && chunks > 1 &&
      p.split_stages == 0 && r.model.layers >= chunks && r.model.layers % chunks != 0 &&
      uneven_split_exists(r.model.layers, p.pp, p.vpp)) {
    p.uneven_pp = true;
    const UnevenEnds u = uneven_ends(r.model.layers, chunks);
    // Layers per chunk, first to last: each listed up to four chunks, else the middle ones
    // counted (a new-user trial read "31 / 31 x 0 / 30 (first and last chunks take fewer)").
    std::string split = fmt::format("{}", u.first);
    if (chunks <= 4)
      for (int i = 1; i + 1 < chunks; ++i) split += fmt::format(" / {}", u.middle);
    else
      split += fmt::format(" / {} x {}", chunks - 2, u.middle);
    split += fmt::format(" / {}", u.last);
    fmt::print(stderr,
               "dtplan: note: {} layers do not divide into pp*vpp = {} chunks; using the uneven "
               "split {} layers per chunk, first to last (Megatron's "
               "--decoder-first/last-pipeline-num-layers; --uneven-pp says so explicitly)\n",
               r.model.layers, chunks, split);
  }
  p.overlap_grad_reduce = !o.no_overlap_grad_reduce;
  p.overlap_param_gather = !o.no_overlap_param_gather;
  p.tp_comm_overlap = o.tp_comm_overlap;
  p.ep_comm_overlap = o.ep_comm_overlap;
  p.moe_dispatcher = parse_moe_dispatcher(o.moe_dispatcher).value_or(MoeDispatcher::kAllToAll);
  if (const auto order = parse_rank_order(o.rank_order)) {
    p.rank_order = *order;
  } else {
    const auto& names = rank_order_names();
    violations.push_back(
        {"--rank-order",
         fmt::format("unknown rank order '{}'{} (known: {})", o.rank_order,
                     did_you_mean(o.rank_order, std::span<const std::string>(names)),
                     fmt::join(names, ", "))});
  }
  auto v = validate_plan(r.model, r.cluster.num_gpus, w, p);
  // Without a data-parallel size (the GPUs do not divide by tp*pp*cp, and --dp was not given)
  // the world-size and batch checks against the rounded-down one only repeat that error under
  // flags the user did not give.
  if (dp_undefined)
    std::erase_if(v, [](const Violation& x) {
      return x.flag == "--dp" ||
             (x.flag == "--gbs" && x.reason.find("mbs*dp") != std::string::npos);
    });
  violations.insert(violations.end(), v.begin(), v.end());
  p.flash_attention = o.attention == "flash";
  p.main_grads_fp32 = o.grads == "fp32";
  if (violations.empty()) {
    auto sv = validate_schedule(p);
    violations.insert(violations.end(), sv.begin(), sv.end());
  }
  auto hv = validate_against_cluster(r.cluster, w, p);
  violations.insert(violations.end(), hv.begin(), hv.end());
  if (violations.empty())
    if (auto ck = checkpoint_interval_violation(r)) violations.push_back(*ck);
  return r;
}

std::optional<Violation> checkpoint_interval_violation(const Resolved& r) {
  // The checkpoint interval runs from one save's start to the next: a synchronous save that
  // blocks longer than the interval would leave no time to train (asynchronous saves raise the
  // interval to their write time instead, simulator/cost/reliability.cpp).
  if (!r.failure.interval_s || r.failure.async_save) return std::nullopt;
  const CheckpointCosts k = checkpoint_costs(r.model, r.cluster, r.plan, r.failure.writers);
  if (*r.failure.interval_s > k.write_s_sync) return std::nullopt;
  return Violation{
      "--checkpoint-interval-s",
      fmt::format("{:g} s is not longer than one synchronous checkpoint ({:.1f} s: copy to "
                  "host {:.1f} s + storage write {:.1f} s, {}), which blocks training: the job "
                  "would do nothing but save; give a longer interval, or --async-save "
                  "(it blocks only for the copy)",
                  *r.failure.interval_s, k.write_s_sync, k.d2h_s, k.storage_write_s,
                  checkpoint_writers_text(k))};
}

void check_checkpoint_interval(const Resolved& r) {
  if (auto v = checkpoint_interval_violation(r)) throw InputError({}, v->flag, v->reason);
}

// The built-in default job: GPT-3 175B on 32 DGX A100 80GB nodes, laid out as Megatron-LM
// runs it (TP8 within a node, PP8, sequence parallelism with selective recomputation, the
// distributed optimizer), batch 1536 x 2048 tokens (Brown et al. 2020).
void apply_builtin_defaults(SpecOptions& s, PlanOptions& p) {
  s.model = "gpt3-175b";
  s.cluster = "dgx-a100-80g";
  s.gpus = 256;
  p.tp = 8;
  p.pp = 8;
  p.sp = true;
  p.recompute = "selective";
  p.zero = 1;
  p.mbs = 1;
  p.gbs = 1536;
  p.seq = 2048;
}

bool any_option_given(const CLI::App& cmd, std::initializer_list<std::string_view> ignored) {
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->count() == 0) continue;
    const std::string n = o->get_name();
    if (std::find(ignored.begin(), ignored.end(), n) == ignored.end()) return true;
  }
  return false;
}

}  // namespace dtplan::cli
