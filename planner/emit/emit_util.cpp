#include <fmt/format.h>

#include <cctype>

#include "core/registry.h"
#include "planner/emit/i_emitter.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {

const IEmitter* find_emitter(const std::string& name) {
  return Registry<IEmitter>::global().find(name);
}

std::vector<std::string> emitter_names() { return Registry<IEmitter>::global().names(); }

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string comment_safe(const std::string& s) {
  std::string out;
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  return out;
}

std::string slurm_name(const std::string& s) {
  std::string out;
  for (char c : s)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  return out.empty() ? std::string("dtplan") : out;
}

std::string slurm_options(const EmitInput& in) {
  std::string out;
  auto safe = [](const std::string& v) {
    std::string r;
    for (char c : v)
      r += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
            c == ':' || c == ',')
               ? c
               : '_';
    return r;
  };
  if (!in.partition.empty()) out += "#SBATCH --partition=" + safe(in.partition) + "\n";
  if (!in.account.empty()) out += "#SBATCH --account=" + safe(in.account) + "\n";
  if (!in.time_limit.empty()) out += "#SBATCH --time=" + safe(in.time_limit) + "\n";
  return out;
}

std::string bash_array(const std::string& name, const std::vector<std::string>& items) {
  std::string out = name + "=(\n";
  for (size_t i = 0; i < items.size(); ++i) {
    // Keep a flag and its value on one line for readability.
    const bool flag = items[i].rfind("--", 0) == 0;
    if (flag && i > 0) out += "\n";
    out += (flag ? "  " : " ") + shell_quote(items[i]);
  }
  return out + "\n)\n";
}

std::vector<std::string> megatron_model_args(const ModelSpec& m, const Workload& w) {
  std::vector<std::string> a;
  auto add = [&](const std::string& flag, auto value) {
    a.push_back(flag);
    a.push_back(fmt::format("{}", value));
  };
  add("--num-layers", m.layers);
  add("--hidden-size", m.hidden);
  add("--ffn-hidden-size", m.ffn_hidden);
  add("--num-attention-heads", m.heads);
  if (m.kv_heads < m.heads && !m.mla) {
    a.push_back("--group-query-attention");
    add("--num-query-groups", m.kv_heads);
  }
  if (m.head_dim * m.heads != m.hidden && !m.mla) add("--kv-channels", m.head_dim);
  add("--seq-length", w.seq_len);
  add("--max-position-embeddings", m.max_seq);
  add("--vocab-size", m.vocab);
  switch (m.position_embedding) {
    case PositionEmbedding::kRope:
      add("--position-embedding-type", "rope");
      break;
    case PositionEmbedding::kLearned:
      add("--position-embedding-type", "learned_absolute");
      break;
    case PositionEmbedding::kAlibi:
    case PositionEmbedding::kNone:
      add("--position-embedding-type", "none");
      break;
  }
  if (m.ffn_act == FfnAct::kSwiglu) a.push_back("--swiglu");
  add("--normalization", m.norm == NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm");
  if (!m.tied_embeddings) a.push_back("--untie-embeddings-and-output-weights");
  if (!m.linear_bias) a.push_back("--disable-bias-linear");
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    add("--num-experts", e.experts);
    add("--moe-router-topk", e.topk);
    add("--moe-ffn-hidden-size", e.expert_ffn_hidden);
    if (e.shared_experts > 0)
      add("--moe-shared-expert-intermediate-size", e.shared_ffn_hidden * e.shared_experts);
    if (e.dense_layers > 0 || e.layer_freq > 1) {
      // Megatron's pattern string: dense layers first, then every layer_freq-th layer MoE.
      std::string pattern = "[";
      for (int i = 0; i < m.layers; ++i)
        pattern += fmt::format("{}{}", i ? "," : "", m.is_moe_layer(i) ? 1 : 0);
      add("--moe-layer-freq", pattern + "]");
    }
    add("--moe-token-dispatcher-type", "alltoall");
    a.push_back("--moe-grouped-gemm");
  }
  if (m.mla) {
    a.push_back("--multi-latent-attention");
    if (m.mla->q_lora_rank > 0) add("--q-lora-rank", m.mla->q_lora_rank);
    add("--kv-lora-rank", m.mla->kv_lora_rank);
    add("--qk-head-dim", m.mla->qk_nope_head_dim);
    add("--qk-pos-emb-head-dim", m.mla->qk_rope_head_dim);
    add("--v-head-dim", m.mla->v_head_dim);
  }
  if (m.mtp_layers > 0) add("--mtp-num-layers", m.mtp_layers);
  return a;
}

std::vector<std::string> megatron_parallel_args(const ModelSpec& m, const Workload& w,
                                                const Plan& p) {
  std::vector<std::string> a;
  auto add = [&](const std::string& flag, auto value) {
    a.push_back(flag);
    a.push_back(fmt::format("{}", value));
  };
  add("--tensor-model-parallel-size", p.tp);
  add("--pipeline-model-parallel-size", p.pp);
  if (p.cp > 1) add("--context-parallel-size", p.cp);
  if (m.moe) {
    add("--expert-model-parallel-size", p.ep);
    add("--expert-tensor-parallel-size", p.etp);
  }
  if (p.vpp > 1) add("--num-virtual-stages-per-pipeline-rank", p.vpp);
  // megatron/training/arguments.py, NVIDIA/Megatron-LM@d98e8a6 (TransformerConfig
  // account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split).
  if (p.account_for_embedding) a.push_back("--account-for-embedding-in-pipeline-split");
  if (p.account_for_loss) a.push_back("--account-for-loss-in-pipeline-split");
  if (p.split_stages > 0 && p.pp > 1) {
    // --pipeline-model-parallel-layout (megatron/training/arguments.py, NVIDIA/Megatron-LM
    // @d98e8a6): stages split by '|', E the embedding, t a decoder layer, m an MTP layer, L the
    // loss; the first layer must be E and the last L, MTP layers on the last stage
    // (megatron/core/transformer/pipeline_parallel_layer_layout.py, validate_layer_layout).
    // Written out in full, without the '*' shorthand.
    std::string layout;
    for (int s = 0; s < p.pp; ++s) {
      if (s > 0) layout += '|';
      if (s == 0) layout += 'E';
      layout += std::string(static_cast<size_t>(layers_on_rank(m, p, s).total()), 't');
      if (s == p.pp - 1) layout += std::string(static_cast<size_t>(m.mtp_layers), 'm') + "L";
    }
    add("--pipeline-model-parallel-layout", layout);
  }
  if (p.uneven_pp && p.pp > 1) {
    add("--decoder-first-pipeline-num-layers", layers_on_rank(m, p, 0).total());
    add("--decoder-last-pipeline-num-layers", layers_on_rank(m, p, p.pp - 1).total());
  }
  if (p.sp) a.push_back("--sequence-parallel");
  if (p.zero == 1) a.push_back("--use-distributed-optimizer");
  if (p.zero == 3) {
    a.push_back("--use-megatron-fsdp");
    add("--data-parallel-sharding-strategy", "optim_grads_params");
  }
  if (p.overlap_grad_reduce && p.dp * p.cp > 1) a.push_back("--overlap-grad-reduce");
  if (p.overlap_param_gather && p.zero >= 1 && p.dp * p.cp > 1)
    a.push_back("--overlap-param-gather");
  if (p.tp_comm_overlap) a.push_back("--tp-comm-overlap");
  if (p.recompute == Recompute::kSelective) add("--recompute-granularity", "selective");
  if (p.recompute == Recompute::kFull) {
    add("--recompute-granularity", "full");
    // uniform x 1: every layer keeps only its input; block x N: the first N layers of each
    // virtual stage do, the others keep everything.
    add("--recompute-method", p.recompute_layers > 0 ? "block" : "uniform");
    add("--recompute-num-layers", p.recompute_layers > 0 ? p.recompute_layers : 1);
  }
  add("--micro-batch-size", p.mbs);
  add("--global-batch-size", p.gbs > 0 ? p.gbs : w.global_batch);
  switch (w.precision) {
    case Precision::kFp16:
      a.push_back("--fp16");
      break;
    case Precision::kFp8:
      a.push_back("--bf16");
      add("--fp8-format", "hybrid");
      break;
    default:
      a.push_back("--bf16");
      break;
  }
  return a;
}

}  // namespace dtplan
