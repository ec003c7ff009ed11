// Options shared by the subcommands: the model, the cluster, the workload and the plan flags
// (Megatron-LM names). Turning them into specs happens here, once, for every command.
#pragma once

#include <functional>
#include <initializer_list>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/catalog.h"
#include "core/plan.h"
#include "simulator/cost/reliability.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace dtplan::cli {

struct SpecOptions {
  std::string model = "gpt3-175b";
  std::string cluster = "dgx-a100-80g";
  int gpus = 0;
  // The job beyond its step (add_resilience_options): checkpoints, restarts, data loading.
  double loader_tokens_per_s_per_node = 0;  // 0 = the cluster's loader
  bool async_save = false;
  double restart_s = -1;                                // < 0: from its parts
  double mtbf_per_gpu_hours = 0;                        // 0 = the cluster's (profile, YAML)
  double checkpoint_interval_s = 0;                     // 0 = Young's
  double skipped_step_fraction = 0;                     // fp16 overflow skips
  double straggler_fraction = 0, straggler_factor = 0;  // factor 0 = 1.2 with a fraction
};

struct PlanOptions {
  int tp = 1, pp = 1, cp = 1, ep = 1, etp = 0, vpp = 1, zero = 0, mbs = 1;
  int dp = 0;  // 0 = derive from the GPU count
  bool sp = false;
  std::string recompute = "none";
  int recompute_layers = 0;
  int offload_layers = 0;
  int64_t gbs = 0;
  int64_t gbs_tokens = 0;
  int64_t seq = 2048;
  std::string schedule;  // "" = 1f1b, or interleaved when vpp > 1
  std::string precision = "bf16";
  std::string fp8_recipe;        // Megatron --fp8-recipe ("" = delayed, Megatron's default)
  int fp8_amax_history_len = 0;  // Megatron --fp8-amax-history-len (0 = 1, Megatron's default)
  bool uneven_pp = false;
  bool account_for_embedding = false, account_for_loss = false;
  std::string stage_split;  // "K:A" (Plan::split_stages, split_layers); "" = none
  bool no_overlap_grad_reduce = false;
  bool no_overlap_param_gather = false;
  bool overlap_grad_reduce = false;   // given explicitly (the default is on)
  bool overlap_param_gather = false;  // given explicitly (the default is on)
  bool tp_comm_overlap = false;
  bool ep_comm_overlap = false;
  std::string moe_dispatcher = "alltoall";
  std::string rank_order = "tp-cp-ep-dp-pp";
  std::string attention = "flash";
  std::string grads = "fp32";
  double train_tokens = 0;
};

void add_spec_options(CLI::App& app, SpecOptions& o);
// A range check of a number flag that also refuses NaN and infinities (CLI11's Range lets NaN
// through): "X is not in [lo, hi]".
CLI::Validator finite_range(double lo, double hi);
void add_plan_options(CLI::App& app, PlanOptions& o);
// --async-save, --restart-s, --mtbf-per-gpu-hours, --checkpoint-interval-s: how checkpoints
// and restarts are priced (launch: the interval its files save at).
void add_checkpoint_options(CLI::App& app, SpecOptions& o);
// The checkpoint options and --loader-tokens-per-s-per-node, --straggler-fraction/-factor,
// --skipped-steps (estimate, simulate, search, report).
void add_resilience_options(CLI::App& app, SpecOptions& o);
// The add_resilience_options flags given on `cmd` copied from `given` into `into` (a file's
// recorded flags, `--from`, that the command line overrides).
void keep_given_resilience_flags(const CLI::App& cmd, const SpecOptions& given, SpecOptions& into);

// Holds values read back from a JSON file (`--from`) to the checks of the flags that set them,
// so that a file and a command line pass one validation: each (key, flag) of `keys` that `obj`
// holds is parsed as `flag value` (a flag without a value: `true` gives it, `false` not) by a
// scratch command that `add` builds; with `defaults`, keys whose value equals the default's
// (what an unset flag records) are left out. A refusal is an InputError naming the file, the
// JSON pointer (`pointer`/key), the flag and the flag's reason.
using JsonFlagKeys = std::span<const std::pair<const char*, const char*>>;
void check_json_as_flags(const nlohmann::json& obj, const std::string& path,
                         const std::string& pointer, JsonFlagKeys keys,
                         const std::function<void(CLI::App&)>& add,
                         const nlohmann::json* defaults = nullptr);

struct Resolved {
  ModelSpec model;
  Cluster cluster;
  Workload workload;
  Plan plan;
  std::string framework = "megatron";  // whose stack runs it (error bands' regime)
  FailureOptions failure;              // how checkpoints and restarts are priced
};

// Prints each violation as "dtplan: error: FLAG: reason"; true when there were any.
bool report_violations(const std::vector<Violation>& violations);

// Prints `text` to stdout, or writes it atomically to `out` and says so on stderr.
void write_output(const std::string& text, const std::string& out);

// The job options of `s` (loader rate, stragglers: into the cluster's services; checkpoints
// and restarts: the returned options); shared by resolve() and the search set-up.
FailureOptions apply_job_options(const SpecOptions& s, const std::string& precision, Cluster& c,
                                 std::vector<Violation>& violations);
// --fp8-recipe and --fp8-amax-history-len ("" and 0: not given) into the workload.
// A framework profile's FP8 recipe default where the hardware cannot run it (MXFP8 off
// Blackwell): throws InputError naming --framework.
void check_profile_fp8_recipe(const std::string& profile, const Workload& w,
                              const HardwareProfile& hw);
void apply_fp8_options(const std::string& recipe, int amax_history_len, const HardwareProfile& hw,
                       Workload& w, std::vector<Violation>& violations);

// Loads the model and cluster and builds the workload and plan; throws InputError. Plan
// violations are returned in `violations` (empty = valid).
Resolved resolve(const SpecOptions& s, const PlanOptions& p, std::vector<Violation>& violations);

// --checkpoint-interval-s against one synchronous save as the framework that runs the plan
// writes it (r.failure.writers): no violation, or one naming the flag. resolve() checks it
// with Megatron's writers; whoever sets another framework's (select_framework, launch) checks
// again with those.
std::optional<Violation> checkpoint_interval_violation(const Resolved& r);
// The same, thrown as an InputError naming the flag.
void check_checkpoint_interval(const Resolved& r);

// The built-in example of `estimate` and `simulate` when no model, cluster or plan flag is
// given: GPT-3 175B on 32 DGX A100 80GB nodes, TP8 PP8 SP, selective recompute, ZeRO-1.
void apply_builtin_defaults(SpecOptions& s, PlanOptions& p);
// Whether any option of `cmd` was given other than the `ignored` ones (output options): with
// none, `estimate` and `simulate` run the built-in example.
bool any_option_given(const CLI::App& cmd, std::initializer_list<std::string_view> ignored);

}  // namespace dtplan::cli
