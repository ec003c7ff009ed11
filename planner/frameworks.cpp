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

// Megatron-LM: the distributed optimizer (ZeRO-1) or Megatron-FSDP, whose
// --data-parallel-sharding-strategy optim_grads is ZeRO-2 (a reduce-scatter on every
// micro-batch, megatron/core/distributed/fsdp/mcore_fsdp_adapter.py:168, as dtplan's ZeRO-2
// cost) and optim_grads_params ZeRO-3; its own 1F1B and interleaved schedules.
constexpr std::array<FrameworkRule, 7> kMegatronRules = {{
    {"Megatron-LM runs only its 1F1B and interleaved pipeline schedules",
     "NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py@d98e8a6 "
     "(get_forward_backward_func)",
     [](const Plan& p, const ModelSpec&) {
       return pipelined(p) && p.schedule != "1f1b" && p.schedule != "interleaved";
     }},
    {"Megatron-LM raises when an MoE model runs tensor parallelism without sequence parallelism",
     "NVIDIA/Megatron-LM megatron/core/transformer/moe/moe_layer.py:636@d98e8a6 (\"performance "
     "may degrade if MoE and tensor parallelism are enabled without also enabling sequence "
     "parallelism\", a ValueError in training)",
     [](const Plan& p, const ModelSpec& m) { return m.is_moe() && p.tp > 1 && !p.sp; }},
    {"Megatron-LM overlaps TP communication with GEMMs only with sequence parallelism",
     "NVIDIA/Megatron-LM megatron/training/arguments.py:1441-1442@d98e8a6",
     [](const Plan& p, const ModelSpec&) { return p.tp_comm_overlap && !p.sp; }},
    {"Megatron-LM's DeepEP dispatcher needs expert TP x EP > 1",
     "NVIDIA/Megatron-LM megatron/core/transformer/moe/token_dispatcher.py:1836@d98e8a6 (\"DeepEP "
     "dispatcher requires TPxEP > 1\")",
     [](const Plan& p, const ModelSpec& m) {
       return m.is_moe() && p.moe_dispatcher != MoeDispatcher::kAllToAll && p.etp * p.ep <= 1;
     }},
    {"Megatron-LM overlaps expert-parallel all-to-all with PP only with virtual stages",
     "NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py:3007@d98e8a6",
     [](const Plan& p, const ModelSpec& m) {
       return m.is_moe() && p.ep_comm_overlap && p.ep > 1 && p.pp > 1 && p.vpp == 1;
     }},
    {"Megatron-Core offloads activations to the CPU only without pipeline parallelism",
     "NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py:1891-1894@d98e8a6",
     [](const Plan& p, const ModelSpec&) { return p.offload_layers > 0 && p.pp > 1; }},
    {"Megatron-Core does not offload activations together with activation recomputation",
     "NVIDIA/Megatron-LM megatron/core/transformer/transformer_config.py:1896-1899@d98e8a6",
     [](const Plan& p, const ModelSpec&) {
       return p.offload_layers > 0 && p.recompute != Recompute::kNone;
     }},
}};

constexpr std::array<FrameworkRule, 9> kDeepSpeedRules = {{
    {"DeepSpeed refuses ZeRO-2/3 with pipeline parallelism",
     "deepspeedai/DeepSpeed deepspeed/runtime/pipe/engine.py@edaa722 (\"ZeRO-2 and ZeRO-3 are "
     "incompatible with pipeline parallelism\")",
     [](const Plan& p, const ModelSpec&) { return p.zero >= 2 && pipelined(p); }},
    {"DeepSpeed's pipeline engine runs 1F1B only",
     "deepspeedai/DeepSpeed deepspeed/runtime/pipe/schedule.py@edaa722 (TrainSchedule)",
     [](const Plan& p, const ModelSpec&) { return pipelined(p) && p.schedule != "1f1b"; }},
    // DeepSpeed's sequence parallelism is Ulysses (all-to-all heads, deepspeed/sequence/layer.py),
    // not Megatron's context parallelism that dtplan models.
    {"DeepSpeed (Megatron-DeepSpeed) has no context parallelism in this form",
     "deepspeedai/Megatron-DeepSpeed megatron/arguments.py:974@f4157be (no "
     "--context-parallel-size; --ds-sequence-parallel-size is Ulysses)",
     [](const Plan& p, const ModelSpec&) { return p.cp > 1; }},
    {"Megatron-DeepSpeed shards experts over the whole TP group or not at all (expert TP 1 or "
     "TP)",
     "deepspeedai/Megatron-DeepSpeed megatron/arguments.py:1151@f4157be "
     "(--enable-expert-tensor-parallelism)",
     [](const Plan& p, const ModelSpec&) { return p.etp != 1 && p.etp != p.tp; }},
    {"DeepSpeed's pipeline engine partitions layers itself",
     "deepspeedai/DeepSpeed deepspeed/runtime/pipe/module.py@edaa722 (PipelineModule "
     "partition_method)",
     [](const Plan& p, const ModelSpec&) {
       return p.uneven_pp || p.account_for_embedding || p.account_for_loss || p.split_stages > 0;
     }},
    {"DeepSpeed refuses MoE with ZeRO-3",
     "deepspeedai/DeepSpeed deepspeed/runtime/engine.py:1678@v0.16.5 (\"MoE not supported with "
     "Stage 3\"; engine.py:2215 in 0.19.8)",
     [](const Plan& p, const ModelSpec& m) { return m.is_moe() && p.zero == 3; }},
    {"Megatron-DeepSpeed has no DeepEP / HybridEP token dispatcher",
     "deepspeedai/Megatron-DeepSpeed megatron/arguments.py@f4157be (no "
     "--moe-token-dispatcher-type)",
     [](const Plan& p, const ModelSpec& m) {
       return m.is_moe() && p.moe_dispatcher != MoeDispatcher::kAllToAll;
     }},
    {"Megatron-DeepSpeed has no expert-parallel communication overlap",
     "deepspeedai/Megatron-DeepSpeed megatron/arguments.py@f4157be (no such argument)",
     [](const Plan& p, const ModelSpec&) { return p.ep_comm_overlap && p.ep > 1; }},
    {"Megatron-DeepSpeed has no layer-wise activation offloading (only --checkpoint-in-cpu of "
     "checkpointed activations)",
     "deepspeedai/Megatron-DeepSpeed megatron/arguments.py@f4157be (no "
     "--cpu-offloading-num-layers)",
     [](const Plan& p, const ModelSpec&) { return p.offload_layers > 0; }},
}};

// torchtitan's FSDP2 with fsdp_reshard_after_forward = "never" keeps gathered parameters
// (ZeRO-2-like memory); dtplan does not model it.
// Any layer split (uneven, two-part, the embedding/loss counted as layers) is written as
// module_fqns_per_model_part (planner/emit/impl/torchtitan.cpp), so none is refused here.
constexpr std::array<FrameworkRule, 7> kTorchtitanRules = {{
    // The first rule is the release's (the version `launch --format torchtitan` writes by
    // default); torchtitan main has parallelism.enable_sequence_parallel and lifts it
    // (torchtitan_main_lifts below).
    {"torchtitan v0.2.2 shards the sequence whenever it shards tensors: TP > 1 needs sequence "
     "parallelism (--sp)",
     "pytorch/torchtitan torchtitan/config/job_config.py:312-480@v0.2.2 (no option to turn "
     "sequence parallelism off in [parallelism])",
     [](const Plan& p, const ModelSpec&) { return p.tp > 1 && !p.sp; }},
    {"torchtitan needs expert TP of 1 or equal to TP",
     "pytorch/torchtitan torchtitan/config/job_config.py:464@v0.2.2 "
     "(expert_tensor_parallel_degree)",
     [](const Plan& p, const ModelSpec&) { return p.etp != 1 && p.etp != p.tp; }},
    {"torchtitan shards with FSDP2 (ZeRO-3) or not at all",
     "pytorch/torchtitan torchtitan/config/job_config.py:313-324@v0.2.2 and configs.py@b5bcd76 "
     "(data_parallel_shard_degree, "
     "data_parallel_replicate_degree)",
     [](const Plan& p, const ModelSpec&) { return p.zero == 1 || p.zero == 2; }},
    {"torchtitan runs 1F1B, interleaved, GPipe and ZB-V pipeline schedules only",
     "pytorch/torchtitan torchtitan/distributed/pipeline_parallel.py@b5bcd76 "
     "(get_schedule_class)",
     [](const Plan& p, const ModelSpec&) {
       return pipelined(p) && !torchtitan_schedule_name(p.schedule);
     }},
    {"dtplan does not write torchtitan's DeepEP / HybridEP dispatcher settings", "",
     [](const Plan& p, const ModelSpec& m) {
       return m.is_moe() && p.moe_dispatcher != MoeDispatcher::kAllToAll;
     }},
    {"torchtitan has no switch for overlapping expert-parallel all-to-all with compute",
     "pytorch/torchtitan torchtitan/config/job_config.py:312-480@v0.2.2 ([parallelism])",
     [](const Plan& p, const ModelSpec&) { return p.ep_comm_overlap && p.ep > 1; }},
    {"torchtitan has no layer-wise activation offloading",
     "pytorch/torchtitan torchtitan/config/job_config.py@v0.2.2 ([activation_checkpoint] has mode "
     "and selective_ac_option; training.enable_cpu_offload offloads FSDP parameters, gradients "
     "and optimizer state, not activations)",
     [](const Plan& p, const ModelSpec&) { return p.offload_layers > 0; }},
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

const FrameworkRule* refusing_rule(Framework f, const Plan& p, const ModelSpec& m) {
  for (const FrameworkRule& r : framework_rules(f))
    if (r.refuses(p, m)) return &r;
  return nullptr;
}

bool torchtitan_main_lifts(const FrameworkRule& r) { return &r == &kTorchtitanRules[0]; }

const char* framework_refusal(Framework f, const Plan& p, const ModelSpec& m) {
  const FrameworkRule* r = refusing_rule(f, p, m);
  return r ? r->reason : nullptr;
}

std::vector<FrameworkWarning> framework_warnings(Framework f, const Plan& p, const ModelSpec& m) {
  std::vector<FrameworkWarning> w;
  if (const FrameworkRule* r = refusing_rule(f, p, m)) {
    std::vector<std::string> can;
    for (size_t k = 0; k < framework_names().size(); ++k)
      if (static_cast<Framework>(k) != f && !refusing_rule(static_cast<Framework>(k), p, m))
        can.push_back(framework_names()[k]);
    w.push_back({"framework-cannot-run",
                 fmt::format("{} cannot run this plan: {}{}; {}", framework_name(f), r->reason,
                             *r->source ? fmt::format(" ({})", r->source) : std::string(),
                             can.empty() ? std::string("no other framework dtplan knows can")
                                         : fmt::format("{} can (--framework {})",
                                                       fmt::join(can, ", "), can.front()))});
  }
  if (f == Framework::kMegatron && p.zero >= 2) {
    // megatron/training/arguments.py:1169@d98e8a6: Megatron-FSDP asserts --ckpt-format
    // fsdp_dtensor.
    w.push_back({"megatron-fsdp",
                 fmt::format("ZeRO-{} under Megatron-LM needs Megatron-FSDP (--use-megatron-fsdp, "
                             "--data-parallel-sharding-strategy {}, --ckpt-format fsdp_dtensor), "
                             "not its default distributed optimizer",
                             p.zero, p.zero == 3 ? "optim_grads_params" : "optim_grads")});
    if (p.pp > 1)
      // megatron/core/distributed/fsdp/mcore_fsdp_adapter.py@d98e8a6 (version 2 refuses
      // pipeline_model_parallel_size != 1); megatron/training/arguments.py (--use-torch-fsdp2
      // "is not supported with pipeline parallelism").
      w.push_back(
          {p.zero == 3 ? "zero3-with-pp" : "zero2-with-pp",
           fmt::format("ZeRO-{} with pipeline parallelism (PP {}) runs under Megatron-FSDP "
                       "version 1 only (--megatron-fsdp-version 2 and --use-torch-fsdp2 "
                       "refuse PP); DeepSpeed refuses it{}",
                       p.zero, p.pp, p.zero == 3 ? ", torchtitan runs FSDP2 with PP" : "")});
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
    n.reserve(std::size(kTorchtitanSchedules));
    for (const auto& s : kTorchtitanSchedules) n.emplace_back(s.first);
    return n;
  }();
  return names;
}

}  // namespace dtplan
