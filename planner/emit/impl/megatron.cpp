// Megatron-LM under Slurm: the argument list (megatron_args.txt, one argv entry per line) and an
// sbatch script running one torchrun per node (CONVENTIONS.md §1 and §5).
#include <fmt/format.h>

#include "core/registry.h"
#include "planner/emit/i_emitter.h"
#include "planner/frameworks.h"

namespace dtplan {
namespace {

class MegatronEmitter final : public IEmitter {
 public:
  const char* refusal(const EmitInput& in) const override {
    return framework_refusal(Framework::kMegatron, *in.plan);
  }

  std::vector<EmittedFile> emit(const EmitInput& in) const override {
    const ModelSpec& m = *in.model;
    const Plan& p = *in.plan;
    const int gpn = in.cluster->profile.node.gpus_per_node;
    const int nodes = in.cluster->nodes();
    std::vector<std::string> args = megatron_model_args(m, *in.work);
    auto par = megatron_parallel_args(m, *in.work, p);
    args.insert(args.end(), par.begin(), par.end());

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
    s += fmt::format("#SBATCH --job-name={}\n", slurm_name(in.job_name));
    s +=
        fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node={}\n",
                    nodes, gpn);
    s += "#SBATCH --exclusive\n#SBATCH --output=logs/%x-%j.out\n";
    s += slurm_options(in);
    s += "set -euo pipefail\n";
    // Megatron: one CUDA connection keeps TP/CP communication kernels ordered (not with FSDP).
    if ((p.tp > 1 || p.cp > 1) && p.zero != 3) s += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
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
    s += bash_array("LOG_ARGS", {"--tensorboard-dir", "tensorboard/" + in.job_name});
    s += "mkdir -p logs\n";
    s += "# The single quotes are deliberate: the variables expand on each node, not here.\n";
    s += fmt::format(
        "srun --ntasks-per-node=1 bash -c 'exec torchrun --nnodes \"$SLURM_NNODES\" "
        "--nproc-per-node {} --node-rank \"$SLURM_NODEID\" --master-addr \"$0\" "
        "--master-port \"$1\" \"$2/pretrain_gpt.py\" \"${{@:3}}\"' \\\n"
        "  \"$MASTER_ADDR\" \"$MASTER_PORT\" \"$MEGATRON_DIR\" \"${{ARGS[@]}}\" "
        "\"${{DATA_ARGS[@]}}\" "
        "\"${{TRAIN_ARGS[@]}}\" \"${{LOG_ARGS[@]}}\"\n",
        gpn);
    return {{"megatron_args.txt", list, false}, {"train_megatron.sbatch", s, true}};
  }
};

}  // namespace
DTPLAN_REGISTER(IEmitter, MegatronEmitter, "megatron",
                "Megatron-LM argument list and a Slurm sbatch script (torchrun per node)")
}  // namespace dtplan
