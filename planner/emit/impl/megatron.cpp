// Megatron-LM under Slurm: the argument list (megatron_args.txt, one argv entry per line) and an
// sbatch script running one torchrun per node (CONVENTIONS.md §1 and §5).
#include <fmt/format.h>

#include "core/error.h"
#include "core/registry.h"
#include "planner/emit/i_emitter.h"
#include "planner/frameworks.h"

namespace dtplan {
namespace {

constexpr FrameworkVersion kMegatronVersions[] = {
    {"d98e8a6",
     "NVIDIA/Megatron-LM main @ d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22, "
     "Megatron-Core 0.20.0 pre-release)"},
};

// The whole argument list, or why Megatron-LM cannot run the plan or model.
ArgList megatron_args(const EmitInput& in) {
  ArgList a = megatron_model_args(*in.model, *in.work, in.plan->moe_dispatcher);
  if (const FrameworkRule* r = refusing_rule(Framework::kMegatron, *in.plan, *in.model))
    a.refuse(fmt::format("{} ({})", r->reason, *r->source ? r->source : "dtplan's reading"));
  ArgList par = megatron_parallel_args(*in.model, *in.work, *in.plan);
  a.args.insert(a.args.end(), par.args.begin(), par.args.end());
  if (!par.refusal.empty()) a.refuse(par.refusal);
  return a;
}

class MegatronEmitter final : public IEmitter {
 public:
  std::span<const FrameworkVersion> versions() const override { return kMegatronVersions; }

  std::string refusal(const EmitInput& in) const override {
    chosen_version(*this, in);
    return megatron_args(in).refusal;
  }

  std::vector<EmittedFile> emit(const EmitInput& in) const override {
    const FrameworkVersion& version = chosen_version(*this, in);
    const ModelSpec& m = *in.model;
    const Plan& p = *in.plan;
    const int gpn = in.cluster->ranks_per_node();
    const int nodes = in.cluster->nodes();
    ArgList built = megatron_args(in);
    if (!built.refusal.empty()) throw InputError({}, "--format", built.refusal);
    const std::vector<std::string>& args = built.args;

    std::string list;
    for (const auto& a : args) list += a + "\n";

    std::string s;
    s += "#!/bin/bash\n";
    // Every value is single-quoted on purpose (literal text, nothing expands here).
    s += "# shellcheck disable=SC2016\n";
    s += fmt::format("# Megatron-LM launch for {} on {} x {} ({}), written by dtplan.\n",
                     comment_safe(m.name), in.cluster->num_gpus,
                     comment_safe(in.cluster->profile.gpu.name),
                     comment_safe(in.cluster->profile.name));
    s += fmt::format("# Plan: {}\n", comment_safe(p.describe()));
    s += fmt::format("# For {}\n", version.description);
    s += fmt::format("#SBATCH --job-name={}\n", slurm_name(in.job_name));
    s +=
        fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node={}\n",
                    nodes, gpn);
    // In the submit folder: Slurm opens the output file before the script runs and does not
    // create a missing folder (a logs/ folder made by the script would be too late).
    s += "#SBATCH --exclusive\n#SBATCH --output=%x-%j.out\n";
    s += slurm_options(in);
    s += "set -euo pipefail\n";
    // Megatron: one CUDA connection keeps TP/CP communication kernels ordered; Megatron-FSDP
    // asserts it is not 1 (arguments.py:1166 @d98e8a6).
    if ((p.tp > 1 || p.cp > 1) && p.zero < 2) s += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
    s += "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)\n";
    s += "MASTER_PORT=\"${MASTER_PORT:-29500}\"\n";
    s += "MEGATRON_DIR=\"${MEGATRON_DIR:-.}\"\n";
    s += bash_array("ARGS", args);
    s += "# Data: set DATA_PATH and TOKENIZER_MODEL, or the run uses Megatron's mock data.\n";
    s += "if [[ -n \"${DATA_PATH:-}\" ]]; then\n"
         "  DATA_ARGS=(--data-path \"$DATA_PATH\" --tokenizer-type HuggingFaceTokenizer "
         "--tokenizer-model \"${TOKENIZER_MODEL:?set TOKENIZER_MODEL}\")\n"
         "else\n  DATA_ARGS=(--mock-data --tokenizer-type NullTokenizer)\nfi\n";
    s += "TRAIN_ARGS=(--train-iters \"${TRAIN_ITERS:-100}\" --lr \"${LR:-1.0e-4}\" "
         "--log-interval 1 --log-throughput)\n";
    s += "# Checkpoints: set SAVE_DIR to write them (--save, every SAVE_INTERVAL iterations).\n";
    s += save_interval_comment(in);
    s += "CKPT_ARGS=()\n";
    // Asynchronous saves of the default torch_dist format need the persistent worker: without
    // it Megatron turns --async-save off with a warning (megatron/training/arguments.py:
    // 1814-1820, config/training_config.py:516-522 @d98e8a6).
    s += fmt::format(
        "if [[ -n \"${{SAVE_DIR:-}}\" ]]; then\n"
        "  CKPT_ARGS=(--save \"$SAVE_DIR\" --load \"$SAVE_DIR\" --save-interval "
        "\"${{SAVE_INTERVAL:-{}}}\"{})\nfi\n",
        in.save_interval_steps, in.async_save ? " --async-save --use-persistent-ckpt-worker" : "");
    s += bash_array("LOG_ARGS", {"--tensorboard-dir", "tensorboard/" + in.job_name});
    s += "# The single quotes are deliberate: the variables expand on each node, not here.\n";
    s += fmt::format(
        "srun --ntasks-per-node=1 bash -c 'exec torchrun --nnodes \"$SLURM_NNODES\" "
        "--nproc-per-node {} --node-rank \"$SLURM_NODEID\" --master-addr \"$0\" "
        "--master-port \"$1\" \"$2/pretrain_gpt.py\" \"${{@:3}}\"' \\\n"
        "  \"$MASTER_ADDR\" \"$MASTER_PORT\" \"$MEGATRON_DIR\" \"${{ARGS[@]}}\" "
        "\"${{DATA_ARGS[@]}}\" "
        "\"${{TRAIN_ARGS[@]}}\" \"${{CKPT_ARGS[@]}}\" \"${{LOG_ARGS[@]}}\"\n",
        gpn);
    return {{"megatron_args.txt", list, false, ""},
            {"train_megatron.sbatch", s, true,
             "MEGATRON_DIR (a Megatron-LM checkout at d98e8a6, with Transformer Engine), "
             "DATA_PATH and TOKENIZER_MODEL (else Megatron's mock data), optionally SAVE_DIR "
             "for checkpoints, TRAIN_ITERS and LR"}};
  }
};

}  // namespace
DTPLAN_REGISTER(IEmitter, MegatronEmitter, "megatron",
                "Megatron-LM argument list and a Slurm sbatch script (torchrun per node)")
}  // namespace dtplan
