// torchtitan: the TOML job config ([job], [training], [parallelism], [activation_checkpoint])
// and a Slurm script launching torchrun on every node (CONVENTIONS.md §3 and §5).
#include <fmt/format.h>

#include "core/error.h"
#include "core/registry.h"
#include "planner/emit/i_emitter.h"
#include "planner/frameworks.h"

namespace dtplan {
namespace {

std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// torchtitan's name for the plan's schedule; refusal() keeps out the ones it has not, so an
// unknown one here is a plan that bypassed it.
const char* schedule_name(const std::string& s) {
  if (const char* name = torchtitan_schedule_name(s)) return name;
  throw InputError({}, "--schedule",
                   fmt::format("torchtitan has no pipeline schedule '{}'; known: {}", s,
                               fmt::join(torchtitan_schedules(), ", ")));
}

class TorchtitanEmitter final : public IEmitter {
 public:
  const char* refusal(const EmitInput& in) const override {
    return framework_refusal(Framework::kTorchtitan, *in.plan);
  }

  std::vector<EmittedFile> emit(const EmitInput& in) const override {
    const ModelSpec& m = *in.model;
    const Plan& p = *in.plan;
    const Workload& w = *in.work;
    const int gpn = in.cluster->profile.node.gpus_per_node;
    const int nodes = in.cluster->nodes();
    const int64_t gbs = p.gbs > 0 ? p.gbs : w.global_batch;

    std::string t;
    t += fmt::format("# torchtitan job config for {} on {} x {} ({}), written by dtplan.\n",
                     comment_safe(m.name), in.cluster->num_gpus,
                     comment_safe(in.cluster->profile.gpu.name),
                     comment_safe(in.cluster->profile.name));
    t += fmt::format("# Plan: {}\n", comment_safe(p.describe()));
    t += "\n[job]\n";
    t += fmt::format("description = {}\n", toml_string(in.job_name));
    if (w.precision == Precision::kFp8) t += "\n[model]\nconverters = [\"float8\"]\n";
    t += "\n[training]\n";
    // With pipelining the local batch is split into micro-batches; without, the micro-batch is
    // the local batch and the global batch implies gradient accumulation.
    t += fmt::format("local_batch_size = {}\n", p.pp > 1 ? gbs / p.dp : p.mbs);
    t += fmt::format("global_batch_size = {}\n", gbs);
    t += fmt::format("seq_len = {}\n", w.seq_len);
    t += fmt::format("mixed_precision_param = {}\n",
                     toml_string(w.precision == Precision::kFp16 ? "float16" : "bfloat16"));
    t += "mixed_precision_reduce = \"float32\"\n";
    t += "\n[parallelism]\n";
    t += fmt::format("data_parallel_replicate_degree = {}\n", p.zero == 3 ? 1 : p.dp);
    t += fmt::format("data_parallel_shard_degree = {}\n", p.zero == 3 ? p.dp : 1);
    t += fmt::format("tensor_parallel_degree = {}\n", p.tp);
    t += fmt::format("pipeline_parallel_degree = {}\n", p.pp);
    t += fmt::format("context_parallel_degree = {}\n", p.cp);
    t += fmt::format("expert_parallel_degree = {}\n", p.ep);
    t += fmt::format("expert_tensor_parallel_degree = {}\n", p.etp);
    if (p.pp > 1) {
      t += fmt::format("pipeline_parallel_schedule = {}\n", toml_string(schedule_name(p.schedule)));
      t += fmt::format("pipeline_parallel_microbatch_size = {}\n", p.mbs);
      if (p.vpp > 1)
        t += fmt::format("pipeline_parallel_layers_per_stage = {}\n", m.layers / (p.pp * p.vpp));
    }
    if (p.tp_comm_overlap) t += "enable_async_tensor_parallel = true\n";
    t += "\n[activation_checkpoint]\n";
    t += fmt::format("mode = {}\n", toml_string(to_string(p.recompute)));

    std::string s;
    s += "#!/bin/bash\n";
    // Every value is single-quoted on purpose (literal text, nothing expands here).
    s += "# shellcheck disable=SC2016\n";
    s += fmt::format("# torchtitan launch for {} on {} x {} ({}), written by dtplan.\n",
                     comment_safe(m.name), in.cluster->num_gpus,
                     comment_safe(in.cluster->profile.gpu.name),
                     comment_safe(in.cluster->profile.name));
    s += fmt::format("#SBATCH --job-name={}\n", slurm_name(in.job_name));
    s += fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks={}\n#SBATCH --gpus-per-task={}\n", nodes,
                     nodes, gpn);
    s += "#SBATCH --output=logs/%x-%j.out\n";
    s += slurm_options(in);
    s += "set -euo pipefail\n";
    s += "CONFIG=\"${CONFIG:-torchtitan.toml}\"\n";
    s += "head_node=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)\n";
    s += "head_node_ip=$(srun --nodes=1 --ntasks=1 -w \"$head_node\" hostname --ip-address)\n";
    s += "mkdir -p logs\n";
    s += fmt::format(
        "srun torchrun --nnodes {} --nproc_per_node {} --rdzv_id \"$SLURM_JOB_ID\" "
        "--rdzv_backend c10d \\\n  --rdzv_endpoint \"$head_node_ip:29500\" -m torchtitan.train "
        "--job.config_file \"$CONFIG\"\n",
        nodes, gpn);
    return {{"torchtitan.toml", t, false}, {"train_torchtitan.sbatch", s, true}};
  }
};

}  // namespace
DTPLAN_REGISTER(IEmitter, TorchtitanEmitter, "torchtitan",
                "torchtitan TOML job config and a Slurm torchrun script")
}  // namespace dtplan
