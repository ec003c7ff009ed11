#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>

#include "core/error.h"
#include "core/registry.h"
#include "planner/emit/i_emitter.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {

const IEmitter* find_emitter(const std::string& name) {
  return Registry<IEmitter>::global().find(name);
}

std::vector<std::string> emitter_names() { return Registry<IEmitter>::global().names(); }

const FrameworkVersion& chosen_version(const IEmitter& e, const EmitInput& in) {
  const auto versions = e.versions();
  if (in.version.empty()) return versions.front();
  std::vector<std::string> names;
  for (const FrameworkVersion& v : versions) {
    if (in.version == v.name) return v;
    names.emplace_back(v.name);
  }
  throw InputError(
      {}, "--framework-version",
      fmt::format("'{}' is not a version this format writes for{}; known: {}", in.version,
                  did_you_mean(in.version, std::span<const std::string>(names)),
                  fmt::join(names, ", ")));
}

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

std::string partial_node_refusal(const Cluster& c) {
  if (c.whole_nodes()) return {};
  const int g = c.profile.node.gpus_per_node;
  return fmt::format(
      "{} GPUs on {}-GPU nodes would leave the last node partly used: launchers start the same "
      "number of ranks on every node (torchrun --nproc-per-node, Slurm --gpus-per-node, a "
      "DeepSpeed hostfile's slots), so the files would run {} ranks, not the {} the plan was "
      "priced for; use a multiple of {} (or at most {})",
      c.num_gpus, g, c.nodes() * g, c.num_gpus, g, g);
}

std::string save_interval_comment(const EmitInput& in) {
  return fmt::format("# SAVE_INTERVAL defaults to {} iterations{}{}.\n", in.save_interval_steps,
                     in.save_interval_why.empty() ? "" : ": ", comment_safe(in.save_interval_why));
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

namespace {

// Megatron-LM @d98e8a6 sources for what the model arguments below can and cannot say.
constexpr const char* kMegatronArgs = "megatron/training/arguments.py@d98e8a6";

// An integer written as such, for flags declared type=int (--rotary-base).
bool integral(double v) { return v == static_cast<double>(static_cast<int64_t>(v)); }

void rope_args(const ModelSpec& m, ArgList& a) {
  const RopeSpec& r = m.rope;
  if (!integral(r.theta))
    a.refuse(
        fmt::format("Megatron-LM's --rotary-base is an integer ({}:2418); rope theta {} is "
                    "not",
                    kMegatronArgs, r.theta));
  a.add("--rotary-base", static_cast<int64_t>(r.theta));
  if (m.mla) {
    // MLATransformerConfig takes rope_type, rotary_scaling_factor, mscale and mscale_all_dim
    // from the arguments of the same names; original_max_position_embeddings (4096),
    // beta_fast (32) and beta_slow (1) have no flag and keep its defaults
    // (megatron/core/transformer/transformer_config.py:3306-3331,
    // megatron/training/argument_utils.py:300-303 @d98e8a6).
    if (r.scaling == RopeScaling::kLlama3) {
      a.refuse(
          "Megatron-LM's multi-latent attention has no Llama 3 rope scaling (--rope-type "
          "takes rope or yarn, arguments.py:2906)");
      return;
    }
    a.add("--rope-type", r.scaling == RopeScaling::kYarn ? "yarn" : "rope");
    // MLATransformerConfig refuses rope fusion with rope_type rope (transformer_config.py:3345),
    // and --position-embedding-type rope leaves it on (arguments.py:1628).
    if (r.scaling != RopeScaling::kYarn) a.add("--no-rope-fusion");
    if (r.scaling == RopeScaling::kYarn) {
      if (r.original_max_seq != 4096 || r.beta_fast != 32 || r.beta_slow != 1)
        a.refuse(fmt::format(
            "Megatron-LM's multi-latent attention fixes YaRN's original context at 4096 and "
            "beta_fast/beta_slow at 32/1 (MLATransformerConfig, transformer_config.py:3318-3325 "
            "@d98e8a6, no flag sets them); the model has {}, {}, {}",
            r.original_max_seq, r.beta_fast, r.beta_slow));
      a.add("--rotary-scaling-factor", r.factor);
      a.add("--mscale", r.mscale);
      a.add("--mscale-all-dim", r.mscale_all_dim);
    }
    return;
  }
  if (r.scaling == RopeScaling::kLlama3) {
    // RotaryEmbedding._apply_scaling(freqs, factor, low_freq_factor=1, high_freq_factor=4,
    // original_max_position_embeddings=8192): only the factor is an argument
    // (megatron/core/models/common/embeddings/rotary_pos_embedding.py:92 @d98e8a6).
    if (r.low_freq_factor != 1 || r.high_freq_factor != 4 || r.original_max_seq != 8192)
      a.refuse(
          fmt::format("Megatron-LM's Llama 3 rope scaling fixes low/high frequency factors "
                      "1/4 and an original context of 8192 (rotary_pos_embedding.py:92 "
                      "@d98e8a6); the model has {}/{} and {}",
                      r.low_freq_factor, r.high_freq_factor, r.original_max_seq));
    a.add("--use-rope-scaling");
    a.add("--rope-scaling-factor", r.factor);
  } else if (r.scaling == RopeScaling::kYarn) {
    a.add("--rotary-scaling-factor", r.factor);
    a.add("--yarn-original-max-position-embeddings", r.original_max_seq);
    a.add("--yarn-beta-fast", r.beta_fast);
    a.add("--yarn-beta-slow", r.beta_slow);
    a.add("--mscale", r.mscale);
    a.add("--mscale-all-dim", r.mscale_all_dim);
  }
}

void router_args(const MoeSpec& e, ArgList& a) {
  // topk_routing_with_score_function (megatron/core/transformer/moe/moe_utils.py @d98e8a6):
  // softmax takes the top-k logits and softmaxes them (renormalised) unless pre-softmax, which
  // keeps the full-softmax weights (:901); sigmoid always renormalises the top-k (:929); the
  // expert bias enters the sigmoid branch only (:923).
  const RouterSpec& r = e.router;
  if (r.score == RouterScore::kSigmoid) {
    a.add("--moe-router-score-function", "sigmoid");
    // Renormalised for top-k > 1 only (:929).
    if (r.normalize_topk != (e.topk > 1))
      a.refuse(
          fmt::format("Megatron-LM renormalises sigmoid router weights exactly when top-k > "
                      "1 (moe_utils.py:929 @d98e8a6); the model, top-{}, {}",
                      e.topk, r.normalize_topk ? "renormalises" : "does not"));
  } else if (!r.normalize_topk) {
    a.add("--moe-router-pre-softmax");
  } else if (e.topk == 1) {
    // A renormalised top-1 softmax weighs the expert 1.0; Megatron refuses top-1 without
    // pre-softmax (transformer_config.py:2669 @d98e8a6), which weighs it by its probability.
    a.refuse(
        "Megatron-LM needs --moe-router-pre-softmax for a top-1 softmax router "
        "(transformer_config.py:2669 @d98e8a6), whose weight is then the expert's "
        "probability, not the model's renormalised 1.0");
  }
  if (r.expert_bias) {
    if (r.score != RouterScore::kSigmoid)
      a.refuse(
          "Megatron-LM applies the router's expert bias to sigmoid scores only "
          "(moe_utils.py:923 @d98e8a6); the model has softmax scores with a bias");
    a.add("--moe-router-enable-expert-bias");
  }
  if (r.topk_scaling != 1.0) a.add("--moe-router-topk-scaling-factor", r.topk_scaling);
  if (r.groups > 1) {
    a.add("--moe-router-num-groups", r.groups);
    a.add("--moe-router-group-topk", r.group_topk);
  }
}

}  // namespace

ArgList megatron_model_args(const ModelSpec& m, const Workload& w, MoeDispatcher dispatcher) {
  ArgList a;
  a.add("--num-layers", m.layers);
  a.add("--hidden-size", m.hidden);
  a.add("--ffn-hidden-size", m.ffn_hidden);
  a.add("--num-attention-heads", m.heads);
  if (m.kv_heads < m.heads && !m.mla) {
    a.add("--group-query-attention");
    a.add("--num-query-groups", m.kv_heads);
  }
  if (int64_t{m.head_dim} * m.heads != m.hidden && !m.mla) a.add("--kv-channels", m.head_dim);
  a.add("--seq-length", w.seq_len);
  a.add("--max-position-embeddings", m.max_seq);
  a.add("--vocab-size", m.vocab);
  switch (m.position_embedding) {
    case PositionEmbedding::kRope:
      a.add("--position-embedding-type",
            m.rope.scaling == RopeScaling::kYarn && !m.mla ? "yarn" : "rope");
      rope_args(m, a);
      break;
    case PositionEmbedding::kLearned:
      a.add("--position-embedding-type", "learned_absolute");
      break;
    case PositionEmbedding::kAlibi:
      a.refuse(
          fmt::format("Megatron-LM has no ALiBi (--position-embedding-type takes "
                      "learned_absolute, rope, yarn, mrope, relative or none, {}:2398)",
                      kMegatronArgs));
      break;
    case PositionEmbedding::kNone:
      a.add("--position-embedding-type", "none");
      break;
  }
  if (m.ffn_act == FfnAct::kSwiglu) a.add("--swiglu");
  a.add("--normalization", m.norm == NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm");
  a.add("--norm-epsilon", m.norm_eps);
  if (!m.tied_embeddings) a.add("--untie-embeddings-and-output-weights");
  if (!m.linear_bias) a.add("--disable-bias-linear");
  if (m.qkv_bias && !m.linear_bias) a.add("--add-qkv-bias");
  if (m.qk_norm) a.add("--qk-layernorm");
  // Megatron's dropout defaults to 0.1 (TransformerConfig, transformer_config.py:188-191): say
  // the model's always.
  a.add("--attention-dropout", m.attention_dropout);
  a.add("--hidden-dropout", m.hidden_dropout);
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    a.add("--num-experts", e.experts);
    a.add("--moe-router-topk", e.topk);
    a.add("--moe-ffn-hidden-size", e.expert_ffn_hidden);
    if (e.shared_experts > 0)
      a.add("--moe-shared-expert-intermediate-size", e.shared_ffn_hidden * e.shared_experts);
    if (e.dense_layers > 0 || e.layer_freq > 1) {
      // Megatron's pattern string: dense layers first, then every layer_freq-th layer MoE.
      std::string pattern = "[";
      for (int i = 0; i < m.layers; ++i)
        pattern += fmt::format("{}{}", i ? "," : "", m.is_moe_layer(i) ? 1 : 0);
      a.add("--moe-layer-freq", pattern + "]");
    }
    router_args(e, a);
    // transformer_config.py:891-899 @d98e8a6: 'flex' with a backend (DeepEP, HybridEP).
    if (dispatcher == MoeDispatcher::kAllToAll) {
      a.add("--moe-token-dispatcher-type", "alltoall");
    } else {
      a.add("--moe-token-dispatcher-type", "flex");
      a.add("--moe-flex-dispatcher-backend", to_string(dispatcher));
    }
    a.add("--moe-grouped-gemm");
  }
  if (m.mla) {
    a.add("--multi-latent-attention");
    if (m.mla->q_lora_rank > 0) a.add("--q-lora-rank", m.mla->q_lora_rank);
    a.add("--kv-lora-rank", m.mla->kv_lora_rank);
    a.add("--qk-head-dim", m.mla->qk_nope_head_dim);
    a.add("--qk-pos-emb-head-dim", m.mla->qk_rope_head_dim);
    a.add("--v-head-dim", m.mla->v_head_dim);
  }
  if (m.mtp_layers > 0) a.add("--mtp-num-layers", m.mtp_layers);
  return a;
}

ArgList megatron_parallel_args(const ModelSpec& m, const Workload& w, const Plan& p) {
  ArgList a;
  a.add("--tensor-model-parallel-size", p.tp);
  a.add("--pipeline-model-parallel-size", p.pp);
  if (p.cp > 1) a.add("--context-parallel-size", p.cp);
  if (m.moe) {
    a.add("--expert-model-parallel-size", p.ep);
    a.add("--expert-tensor-parallel-size", p.etp);
    // Virtual stages with PP: a framework rule; no full recomputation (a rule cannot see it,
    // planner/frameworks.h): transformer_config.py:3021 @d98e8a6.
    if (p.ep_comm_overlap && p.ep > 1) {
      if (p.recompute == Recompute::kFull)
        a.refuse(
            "Megatron-LM refuses expert-parallel all-to-all overlap with full "
            "recomputation (megatron/core/transformer/transformer_config.py:3021@d98e8a6)");
      a.add("--overlap-moe-expert-parallel-comm");
    }
  }
  // Chunk sizes that --decoder-first/last-pipeline-num-layers cannot say: a two-part split, or
  // uneven stages with virtual stages (transformer_config.py:2305-2366 @d98e8a6 needs the first
  // and last stage's layers divisible by the virtual stages), go into
  // --pipeline-model-parallel-layout, which also sets the virtual stages (arguments.py:928-950:
  // at most one of it and --num-virtual-stages-per-pipeline-rank).
  const bool layout = p.pp > 1 && (p.split_stages > 0 || (p.uneven_pp && p.vpp > 1));
  if (p.vpp > 1 && !layout) a.add("--num-virtual-stages-per-pipeline-rank", p.vpp);
  // megatron/training/arguments.py, NVIDIA/Megatron-LM@d98e8a6 (TransformerConfig
  // account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split).
  if (p.account_for_embedding) a.add("--account-for-embedding-in-pipeline-split");
  if (p.account_for_loss) a.add("--account-for-loss-in-pipeline-split");
  if (layout) {
    // --pipeline-model-parallel-layout: pp x vpp segments split by '|', segment v x pp + r being
    // rank r's v-th chunk (megatron/core/transformer/pipeline_parallel_layer_layout.py,
    // __init__); E the embedding, t a decoder layer, m an MTP layer, L the loss; the first
    // layer must be E and the last L, MTP layers on the last stage (validate_layer_layout).
    // Written out in full, without the '*' shorthand.
    std::string text;
    const int chunks = p.pp * p.vpp;
    for (int c = 0; c < chunks; ++c) {
      if (c > 0) text += '|';
      if (c == 0) text += 'E';
      text += std::string(static_cast<size_t>(chunk_layers(m, p, c).size()), 't');
      if (c == chunks - 1) text += std::string(static_cast<size_t>(m.mtp_layers), 'm') + "L";
    }
    a.add("--pipeline-model-parallel-layout", text);
  } else if (p.uneven_pp && p.pp > 1) {
    a.add("--decoder-first-pipeline-num-layers", decoder_layers_on_rank(m, p, 0).total());
    a.add("--decoder-last-pipeline-num-layers", decoder_layers_on_rank(m, p, p.pp - 1).total());
  }
  if (p.sp) a.add("--sequence-parallel");
  if (p.zero == 1) a.add("--use-distributed-optimizer");
  if (p.zero >= 2) {
    // Megatron-FSDP: optim_grads (ZeRO-2) or optim_grads_params (ZeRO-3), which asserts the
    // fsdp_dtensor checkpoint format (arguments.py:1169, :3190 @d98e8a6).
    a.add("--use-megatron-fsdp");
    a.add("--data-parallel-sharding-strategy", p.zero == 3 ? "optim_grads_params" : "optim_grads");
    a.add("--ckpt-format", "fsdp_dtensor");
    // Megatron-FSDP keeps its own gradient buffer and reduction dtype (--megatron-fsdp-main-
    // grads-dtype, --megatron-fsdp-grad-comm-dtype, arguments.py:3691-3696; "auto" is the
    // parameters' bf16, param_and_grad_buffer.py:2317-2322): the plan's gradient precision.
    const char* g = p.main_grads_fp32 && w.precision != Precision::kFp16 ? "fp32"
                    : w.precision == Precision::kFp16                    ? "fp16"
                                                                         : "bf16";
    a.add("--megatron-fsdp-main-grads-dtype", g);
    a.add("--megatron-fsdp-grad-comm-dtype", g);
  }
  if (p.overlap_grad_reduce && p.dp * p.cp > 1) a.add("--overlap-grad-reduce");
  if (p.overlap_param_gather && p.zero >= 1 && p.dp * p.cp > 1) {
    // arguments.py:1024-1029 @d98e8a6: --overlap-param-gather needs --overlap-grad-reduce.
    if (!p.overlap_grad_reduce)
      a.refuse(
          "Megatron-LM overlaps the parameter all-gather only together with the gradient "
          "reduction (--overlap-param-gather requires --overlap-grad-reduce, "
          "megatron/training/arguments.py:1024-1029 @d98e8a6); the plan overlaps one only");
    a.add("--overlap-param-gather");
  }
  if (p.tp_comm_overlap) a.add("--tp-comm-overlap");  // it needs SP: a framework rule
  if (p.recompute == Recompute::kSelective) a.add("--recompute-granularity", "selective");
  if (p.recompute == Recompute::kFull) {
    a.add("--recompute-granularity", "full");
    // uniform x 1: every layer keeps only its input; block x N: the first N layers of each
    // virtual stage do, the others keep everything.
    a.add("--recompute-method", p.recompute_layers > 0 ? "block" : "uniform");
    a.add("--recompute-num-layers", p.recompute_layers > 0 ? p.recompute_layers : 1);
  }
  // Megatron-Core's CPU offloading of the first N layers' activations (cpu_offloading is set
  // from the count: megatron/training/arguments.py:1950-1951 @d98e8a6).
  if (p.offload_layers > 0) a.add("--cpu-offloading-num-layers", p.offload_layers);
  if (!p.flash_attention) a.add("--attention-backend", "unfused");
  a.add("--micro-batch-size", p.mbs);
  a.add("--global-batch-size", p.gbs > 0 ? p.gbs : w.global_batch);
  switch (w.precision) {
    case Precision::kFp16:
      a.add("--fp16");
      break;
    case Precision::kFp8:
      a.add("--bf16");
      a.add("--fp8-format", "hybrid");
      break;
    default:
      a.add("--bf16");
      break;
  }
  // Gradient accumulation and reduction precision (arguments.py:1204-1217 @d98e8a6): bf16
  // training keeps fp32 main gradients unless --grad-reduce-in-bf16; fp16 training keeps 16-bit
  // ones, as dtplan prices fp16 (simulator/cost/memory_model.cpp). Megatron-FSDP: above.
  if (w.precision != Precision::kFp16 && !p.main_grads_fp32 && p.zero < 2)
    a.add("--grad-reduce-in-bf16");
  if (w.precision == Precision::kFp8) {
    // transformer_config.py fp8_recipe / fp8_amax_history_len (arguments from the dataclass).
    a.add("--fp8-recipe", to_string(w.fp8_recipe));
    if (w.fp8_recipe == Fp8Recipe::kDelayed)
      a.add("--fp8-amax-history-len", w.fp8_amax_history_len);
  }
  // Rank order: Megatron's default is tp-cp-ep-dp-pp; --use-tp-pp-dp-mapping gives
  // tp-cp-ep-pp-dp (megatron/training/initialize.py:395 @d98e8a6).
  if (p.rank_order == RankOrder::kTpCpEpPpDp ||
      (p.rank_order == RankOrder::kTpPpDp && p.cp == 1 && p.ep == 1))
    a.add("--use-tp-pp-dp-mapping");
  else if (p.rank_order == RankOrder::kTpPpDp)
    a.refuse(
        "Megatron-LM numbers ranks tp-cp-ep-dp-pp or tp-cp-ep-pp-dp (initialize.py:395 "
        "@d98e8a6); tp-pp-dp with CP or EP is neither");
  return a;
}

}  // namespace dtplan
