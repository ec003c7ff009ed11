// DeepSpeed (Megatron-DeepSpeed): ds_config.json, the argument list, a hostfile and the
// `deepspeed` launcher script (CONVENTIONS.md §2).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/registry.h"
#include "planner/emit/i_emitter.h"
#include "planner/frameworks.h"

namespace dtplan {
namespace {

class DeepSpeedEmitter final : public IEmitter {
 public:
  const char* refusal(const EmitInput& in) const override {
    return framework_refusal(Framework::kDeepSpeed, *in.plan);
  }

  std::vector<EmittedFile> emit(const EmitInput& in) const override {
    const ModelSpec& m = *in.model;
    const Plan& p = *in.plan;
    const Workload& w = *in.work;
    const int gpn = in.cluster->profile.node.gpus_per_node;
    const int nodes = in.cluster->nodes();

    nlohmann::ordered_json ds;
    const int64_t gbs = p.gbs > 0 ? p.gbs : w.global_batch;
    ds["train_batch_size"] = gbs;
    ds["train_micro_batch_size_per_gpu"] = p.mbs;
    ds["gradient_accumulation_steps"] = gbs / (static_cast<int64_t>(p.mbs) * p.dp);
    if (w.precision == Precision::kFp16) {
      ds["fp16"] = {{"enabled", true},           {"loss_scale", 0}, {"initial_scale_power", 16},
                    {"loss_scale_window", 1000}, {"hysteresis", 2}, {"min_loss_scale", 1}};
    } else {
      ds["bf16"] = {{"enabled", true}};
    }
    ds["gradient_clipping"] = 1.0;
    nlohmann::ordered_json z;
    z["stage"] = p.zero;
    z["allgather_partitions"] = true;
    z["allgather_bucket_size"] = 5e8;
    z["reduce_scatter"] = true;
    z["reduce_bucket_size"] = 5e8;
    z["overlap_comm"] = p.overlap_grad_reduce;
    z["contiguous_gradients"] = true;
    if (p.zero == 3) {
      z["stage3_prefetch_bucket_size"] = 5e7;
      z["stage3_param_persistence_threshold"] = 1e5;
      z["stage3_max_live_parameters"] = 1e9;
      z["stage3_max_reuse_distance"] = 1e9;
    }
    ds["zero_optimization"] = z;
    ds["steps_per_print"] = 10;
    ds["wall_clock_breakdown"] = false;

    // Megatron-DeepSpeed spells GQA and MoE its own way (megatron/arguments.py of the fork).
    std::vector<std::string> args;
    {
      const auto lm = megatron_model_args(m, w);
      for (size_t i = 0; i < lm.size(); ++i) {
        const std::string& a = lm[i];
        const bool has_value = i + 1 < lm.size() && lm[i + 1].rfind("--", 0) != 0;
        if (a == "--group-query-attention" || a == "--moe-token-dispatcher-type" ||
            a == "--moe-grouped-gemm" || a == "--moe-layer-freq" ||
            a == "--moe-shared-expert-intermediate-size" || a == "--moe-ffn-hidden-size") {
          if (has_value && a != "--group-query-attention" && a != "--moe-grouped-gemm") ++i;
          continue;
        }
        if (a == "--num-query-groups")
          args.push_back("--num-key-value-heads");
        else if (a == "--moe-router-topk")
          args.push_back("--topk");
        else
          args.push_back(a);
      }
    }
    // Megatron-DeepSpeed spells ZeRO and pipelining its own way; drop Megatron-LM's optimizer,
    // FSDP and overlap flags, which that fork does not have.
    const auto par = megatron_parallel_args(m, w, p);
    for (size_t i = 0; i < par.size(); ++i) {
      const std::string& a = par[i];
      if (a == "--expert-model-parallel-size") {
        args.push_back("--moe-expert-parallel-size");
        continue;
      }
      if (a == "--expert-tensor-parallel-size" || a == "--data-parallel-sharding-strategy") {
        ++i;  // and its value
        continue;
      }
      if (a == "--use-distributed-optimizer" || a == "--use-megatron-fsdp" ||
          a == "--overlap-grad-reduce" || a == "--overlap-param-gather")
        continue;
      args.push_back(a);
    }
    args.push_back("--deepspeed");
    args.push_back("--deepspeed_config");
    args.push_back("ds_config.json");
    args.push_back("--zero-stage");
    args.push_back(fmt::format("{}", p.zero));
    if (p.pp == 1) args.push_back("--no-pipeline-parallel");
    if (p.recompute != Recompute::kNone) args.push_back("--deepspeed-activation-checkpointing");

    std::string list;
    for (const auto& a : args) list += a + "\n";

    std::string hosts;
    for (int i = 0; i < nodes; ++i)
      hosts += fmt::format("{} slots={}\n",
                           i < static_cast<int>(in.hosts.size()) ? in.hosts[static_cast<size_t>(i)]
                                                                 : fmt::format("node-{}", i),
                           gpn);

    std::string s;
    s += "#!/bin/bash\n";
    // Every value is single-quoted on purpose (literal text, nothing expands here).
    s += "# shellcheck disable=SC2016\n";
    s += fmt::format("# Megatron-DeepSpeed launch for {} on {} x {} ({}), written by dtplan.\n",
                     comment_safe(m.name), in.cluster->num_gpus,
                     comment_safe(in.cluster->profile.gpu.name),
                     comment_safe(in.cluster->profile.name));
    s += fmt::format("# Plan: {}\n", comment_safe(p.describe()));
    s += fmt::format("# Job: {}\n", comment_safe(in.job_name));
    s += "set -euo pipefail\n";
    s += "cd \"$(dirname \"$0\")\"\n";
    s += "MEGATRON_DS_DIR=\"${MEGATRON_DS_DIR:-.}\"\n";
    s += bash_array("ARGS", args);
    s += "TRAIN_ARGS=(--train-iters \"${TRAIN_ITERS:-100}\" --lr \"${LR:-1.0e-4}\" --log-interval "
         "1)\n";
    s += fmt::format(
        "deepspeed --num_nodes={} --num_gpus={} --hostfile=hostfile \\\n"
        "  \"$MEGATRON_DS_DIR/pretrain_gpt.py\" \"${{ARGS[@]}}\" \"${{TRAIN_ARGS[@]}}\" \"$@\"\n",
        nodes, gpn);
    return {{"ds_config.json",
             ds.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", false},
            {"megatron_deepspeed_args.txt", list, false},
            {"hostfile", hosts, false},
            {"train_deepspeed.sh", s, true}};
  }
};

}  // namespace
DTPLAN_REGISTER(IEmitter, DeepSpeedEmitter, "deepspeed",
                "DeepSpeed ds_config.json, Megatron-DeepSpeed arguments, hostfile and launcher")
}  // namespace dtplan
