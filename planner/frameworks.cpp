#include "planner/frameworks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/error.h"

namespace dtplan {

// Sources: the framework repositories as of these commits (checked for the rules that cite them).
//   Megatron-LM  NVIDIA/Megatron-LM          @ d98e8a64ddf34856e74b24714e3bedb2f5a39553
//   DeepSpeed    deepspeedai/DeepSpeed       @ edaa7221267243c7be7fb49c5d5f5c4fb97b4641
//   torchtitan   pytorch/torchtitan          @ b5bcd76c66d0acb1a08b176d9639425bc55e0b2a

namespace {

bool pipelined(const Plan& p) { return p.pp > 1; }

// Megatron-LM: the distributed optimizer (ZeRO-1) or Megatron-FSDP (ZeRO-3); its own 1F1B and
// interleaved schedules. Megatron-FSDP also has a gradient-sharding strategy (optim_grads,
// --data-parallel-sharding-strategy in megatron/training/arguments.py), which dtplan neither
// writes (planner/emit/emit_util.cpp) nor models for Megatron: ZeRO-2 stays refused here.
constexpr std::array<FrameworkRule, 2> kMegatronRules = {{
    {"Megatron-LM runs here with its distributed optimizer (ZeRO-1) or Megatron-FSDP "
     "optim_grads_params (ZeRO-3); dtplan does not write its gradient-only sharding (ZeRO-2)",
     "", [](const Plan& p) { return p.zero == 2; }},
    {"Megatron-LM runs only its 1F1B and interleaved pipeline schedules",
     "NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py@d98e8a6 "
     "(get_forward_backward_func)",
     [](const Plan& p) {
       return pipelined(p) && p.schedule != "1f1b" && p.schedule != "interleaved";
     }},
}};

constexpr std::array<FrameworkRule, 5> kDeepSpeedRules = {{
    {"DeepSpeed refuses ZeRO-2/3 with pipeline parallelism",
     "deepspeedai/DeepSpeed deepspeed/runtime/pipe/engine.py@edaa722 (\"ZeRO-2 and ZeRO-3 are "
     "incompatible with pipeline parallelism\")",
     [](const Plan& p) { return p.zero >= 2 && pipelined(p); }},
    {"DeepSpeed's pipeline engine runs 1F1B only",
     "deepspeedai/DeepSpeed deepspeed/runtime/pipe/schedule.py@edaa722 (TrainSchedule)",
     [](const Plan& p) { return pipelined(p) && p.schedule != "1f1b"; }},
    // DeepSpeed's sequence parallelism is Ulysses (all-to-all heads, deepspeed/sequence/layer.py),
    // not Megatron's context parallelism that dtplan models.
    {"DeepSpeed (Megatron-DeepSpeed) has no context parallelism in this form", "",
     [](const Plan& p) { return p.cp > 1; }},
    {"Megatron-DeepSpeed has no expert tensor parallelism", "",
     [](const Plan& p) { return p.etp != 1; }},
    {"DeepSpeed's pipeline engine partitions layers itself",
     "deepspeedai/DeepSpeed deepspeed/runtime/pipe/module.py@edaa722 (PipelineModule "
     "partition_method)",
     [](const Plan& p) {
       return p.uneven_pp || p.account_for_embedding || p.account_for_loss || p.split_stages > 0;
     }},
}};

// torchtitan's FSDP2 with fsdp_reshard_after_forward = "never" keeps gathered parameters
// (ZeRO-2-like memory); dtplan does not model it.
constexpr std::array<FrameworkRule, 5> kTorchtitanRules = {{
    {"torchtitan splits layers evenly (pipeline_parallel_layers_per_stage) or by module names "
     "(module_fqns_per_model_part), which dtplan does not write for a two-part split",
     "pytorch/torchtitan torchtitan/config/configs.py@b5bcd76",
     [](const Plan& p) { return p.split_stages > 0; }},
    {"torchtitan counts the embedding and loss as its own first/last-stage layer reductions "
     "(pipeline_parallel_first_stage_less_layers), which dtplan does not write",
     "pytorch/torchtitan torchtitan/config/configs.py@b5bcd76",
     [](const Plan& p) { return p.account_for_embedding || p.account_for_loss; }},
    {"torchtitan needs expert TP of 1 or equal to TP", "",
     [](const Plan& p) { return p.etp != 1 && p.etp != p.tp; }},
    {"torchtitan shards with FSDP2 (ZeRO-3) or not at all",
     "pytorch/torchtitan torchtitan/config/configs.py@b5bcd76 (data_parallel_shard_degree, "
     "data_parallel_replicate_degree)",
     [](const Plan& p) { return p.zero == 1 || p.zero == 2; }},
    {"torchtitan runs 1F1B, interleaved, GPipe and ZB-V pipeline schedules only",
     "pytorch/torchtitan torchtitan/distributed/pipeline_parallel.py@b5bcd76 "
     "(get_schedule_class)",
     [](const Plan& p) { return pipelined(p) && !torchtitan_schedule_name(p.schedule); }},
}};

// dtplan schedule -> torchtitan's pipeline_parallel_schedule. torchtitan at b5bcd76 also has
// DualPipeV; dtplan does not write it yet.
constexpr std::array<std::pair<std::string_view, const char*>, 4> kTorchtitanSchedules = {{
    {"1f1b", "1F1B"},
    {"interleaved", "Interleaved1F1B"},
    {"gpipe", "GPipe"},
    {"zb-v", "ZBVZeroBubble"},
}};

}  // namespace

const std::vector<std::string>& framework_names() {
  static const std::vector<std::string> names = {"megatron", "deepspeed", "torchtitan"};
  return names;
}

const char* framework_name(Framework f) {
  return framework_names()[static_cast<size_t>(f)].c_str();
}

Framework parse_framework(std::string_view name, const std::string& field) {
  const auto& names = framework_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end())
    throw InputError({}, field,
                     fmt::format("unknown framework '{}'{}; known: {}", name,
                                 did_you_mean(name, std::span<const std::string>(names)),
                                 fmt::join(names, ", ")));
  return static_cast<Framework>(it - names.begin());
}

std::span<const FrameworkRule> framework_rules(Framework f) {
  switch (f) {
    case Framework::kMegatron:
      return kMegatronRules;
    case Framework::kDeepSpeed:
      return kDeepSpeedRules;
    case Framework::kTorchtitan:
      return kTorchtitanRules;
  }
  return {};
}

const FrameworkRule* refusing_rule(Framework f, const Plan& p) {
  for (const FrameworkRule& r : framework_rules(f))
    if (r.refuses(p)) return &r;
  return nullptr;
}

const char* framework_refusal(Framework f, const Plan& p) {
  const FrameworkRule* r = refusing_rule(f, p);
  return r ? r->reason : nullptr;
}

std::vector<FrameworkWarning> framework_warnings(Framework f, const Plan& p) {
  std::vector<FrameworkWarning> w;
  if (const FrameworkRule* r = refusing_rule(f, p)) {
    std::vector<std::string> can;
    for (size_t k = 0; k < framework_names().size(); ++k)
      if (static_cast<Framework>(k) != f && !refusing_rule(static_cast<Framework>(k), p))
        can.push_back(framework_names()[k]);
    w.push_back({"framework-cannot-run",
                 fmt::format("{} cannot run this plan: {}{}; {}", framework_name(f), r->reason,
                             *r->source ? fmt::format(" ({})", r->source) : std::string(),
                             can.empty() ? std::string("no other framework dtplan knows can")
                                         : fmt::format("{} can (--framework {})",
                                                       fmt::join(can, ", "), can.front()))});
  }
  if (f == Framework::kMegatron && p.zero == 3) {
    // megatron/training/arguments.py@d98e8a6: Megatron-FSDP asserts --ckpt-format fsdp_dtensor.
    w.push_back({"megatron-fsdp",
                 "ZeRO-3 under Megatron-LM needs Megatron-FSDP (--use-megatron-fsdp, "
                 "--data-parallel-sharding-strategy optim_grads_params, --ckpt-format "
                 "fsdp_dtensor), not its default distributed optimizer"});
    if (p.pp > 1)
      // megatron/core/distributed/fsdp/mcore_fsdp_adapter.py@d98e8a6 (version 2 refuses
      // pipeline_model_parallel_size != 1); megatron/training/arguments.py (--use-torch-fsdp2
      // "is not supported with pipeline parallelism").
      w.push_back({"zero3-with-pp",
                   fmt::format("ZeRO-3 with pipeline parallelism (PP {}) runs under Megatron-FSDP "
                               "version 1 only (--megatron-fsdp-version 2 and --use-torch-fsdp2 "
                               "refuse PP); DeepSpeed refuses it, torchtitan runs FSDP2 with PP",
                               p.pp)});
  }
  return w;
}

const char* torchtitan_schedule_name(std::string_view schedule) {
  for (const auto& [ours, theirs] : kTorchtitanSchedules)
    if (ours == schedule) return theirs;
  return nullptr;
}

const std::vector<std::string>& torchtitan_schedules() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& s : kTorchtitanSchedules) n.emplace_back(s.first);
    return n;
  }();
  return names;
}

}  // namespace dtplan
