// DeepSpeed (Megatron-DeepSpeed): ds_config.json, the argument list, a hostfile and the
// `deepspeed` launcher script (CONVENTIONS.md §2).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/registry.h"
#include "planner/emit/i_emitter.h"
#include "planner/frameworks.h"

namespace dtplan {
namespace {

// The ds_config.json is the same for both; each is loaded by that DeepSpeed release's own
// DeepSpeedConfig in tests/e2e/deepspeed_config.sh.
constexpr FrameworkVersion kDeepSpeedVersions[] = {
    {"0.19.8",
     "DeepSpeed 0.19.8 with deepspeedai/Megatron-DeepSpeed @ "
     "f4157bea69f3df8c6cb66f2ebcda66ba03d1288e (2024-12-24)"},
    {"0.16.5",
     "DeepSpeed 0.16.5 with deepspeedai/Megatron-DeepSpeed @ "
     "f4157bea69f3df8c6cb66f2ebcda66ba03d1288e (2024-12-24)"},
};

// Megatron-DeepSpeed's megatron/arguments.py @ f4157be (cited below by line), whose parse_args
// aborts on an unknown flag (:60). It spells many things differently from Megatron-LM and
// lacks others; what it lacks is refused, never dropped.
constexpr const char* kMds = "Megatron-DeepSpeed megatron/arguments.py@f4157be";

ArgList mds_args(const EmitInput& in) {
  const ModelSpec& m = *in.model;
  const Plan& p = *in.plan;
  const Workload& w = *in.work;
  ArgList a;
  if (const FrameworkRule* r = refusing_rule(Framework::kDeepSpeed, p, m))
    a.refuse(fmt::format("{} ({})", r->reason, *r->source ? r->source : "dtplan's reading"));
  auto lacks = [&](const std::string& what) {
    a.refuse(fmt::format("Megatron-DeepSpeed has no {} ({} defines no such argument)", what, kMds));
  };
  if (in.async_save) lacks("asynchronous checkpoint save (--async-save)");
  a.add("--num-layers", m.layers);
  a.add("--hidden-size", m.hidden);
  a.add("--ffn-hidden-size", m.ffn_hidden);
  a.add("--num-attention-heads", m.heads);
  if (m.kv_heads < m.heads) a.add("--num-key-value-heads", m.kv_heads);  // :623
  if (int64_t{m.head_dim} * m.heads != m.hidden) a.add("--kv-channels", m.head_dim);
  a.add("--seq-length", w.seq_len);
  a.add("--max-position-embeddings", m.max_seq);
  switch (m.position_embedding) {
    case PositionEmbedding::kRope:
      // :633-637: rotary on, theta an integer (dest rope_theta); no rope scaling flag.
      a.add("--use-rotary-position-embeddings");
      if (m.rope.theta != static_cast<double>(static_cast<int64_t>(m.rope.theta)))
        a.refuse(fmt::format("{}:635 takes an integer rope theta; the model has {}", kMds,
                             m.rope.theta));
      a.add("--rotary-position-embeddings-theta", static_cast<int64_t>(m.rope.theta));
      if (m.rope.scaling != RopeScaling::kNone)
        lacks(fmt::format("{} rope scaling", to_string(m.rope.scaling)));
      break;
    case PositionEmbedding::kLearned:
      break;  // the default: a learned absolute table
    case PositionEmbedding::kNone:
      a.add("--no-position-embedding");  // :640
      break;
    case PositionEmbedding::kAlibi:
      lacks("ALiBi");
      break;
  }
  if (m.ffn_act == FfnAct::kSwiglu) a.add("--swiglu");
  a.add("--normalization", m.norm == NormKind::kRmsNorm ? "rmsnorm" : "layernorm");  // :647
  a.add("--layernorm-epsilon", m.norm_eps);                                          // :652
  if (!m.tied_embeddings) a.add("--untie-embeddings-and-output-weights");
  if (!m.linear_bias) a.add("--disable-bias-linear");  // :937
  if (m.qkv_bias) lacks("Q/K/V-only bias");
  if (m.qk_norm) lacks("query/key normalisation");
  if (m.mla) lacks("multi-latent attention");
  if (m.mtp_layers > 0) lacks("multi-token prediction");
  // :768-771, both default 0.1.
  a.add("--attention-dropout", m.attention_dropout);
  a.add("--hidden-dropout", m.hidden_dropout);
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    // DeepSpeed MoE (deepspeed.moe.layer.MoE): every expert is the layer's FFN
    // (ffn_hidden_size), MoE on every expert_interval-th layer counting from 1
    // (megatron/model/transformer.py:1650-1660 @f4157be), a softmax top-k gate.
    a.add("--num-experts", e.experts);
    a.add("--topk", e.topk);
    // DeepSpeed's top-2 gate samples the second expert with Gumbel noise unless told not to
    // (megatron/arguments.py:924, deepspeed/moe/sharded_moe.py:305-308@v0.16.5); top-1 drops
    // tokens at random (random token selection, sharded_moe.py:183-233): only top-2 is the
    // model's router.
    if (e.topk == 2)
      a.add("--disable-moe-top2-2nd-expert-sampling");
    else
      a.refuse(
          fmt::format("Megatron-DeepSpeed's gate is the model's router only for top-2 "
                      "(top-1 selects tokens at random, deepspeed/moe/sharded_moe.py:183-233"
                      "@v0.16.5); the model routes top-{}",
                      e.topk));
    if (e.dense_layers > 0) lacks("dense leading layers before the MoE layers");
    a.add("--expert-interval", e.layer_freq);  // default 2 (:614)
    a.add("--moe-expert-parallel-size", p.ep);
    if (p.etp > 1) a.add("--enable-expert-tensor-parallelism");  // :1151, experts over TP
    // dtplan models dropless MoE; DeepSpeed drops over capacity by default (:910).
    a.add("--disable-moe-token-dropping");
    if (e.expert_ffn_hidden != m.ffn_hidden)
      a.refuse(
          fmt::format("Megatron-DeepSpeed's experts are the dense FFN's width ({}); the "
                      "model's experts are {} wide",
                      m.ffn_hidden, e.expert_ffn_hidden));
    if (e.shared_experts > 0) lacks("shared experts");
    const RouterSpec& r = e.router;
    if (r.score != RouterScore::kSoftmax || !r.normalize_topk || r.expert_bias ||
        r.topk_scaling != 1.0 || r.groups > 1)
      lacks("router but a softmax top-k gate (sigmoid scores, expert bias, scaling or groups)");
  }
  a.add("--tensor-model-parallel-size", p.tp);
  a.add("--pipeline-model-parallel-size", p.pp);
  if (p.pp == 1) a.add("--no-pipeline-parallel");  // :954
  if (p.sp) a.add("--sequence-parallel");
  if (p.recompute == Recompute::kSelective) a.add("--recompute-granularity", "selective");
  if (p.recompute == Recompute::kFull) {
    a.add("--recompute-granularity", "full");
    a.add("--recompute-method", p.recompute_layers > 0 ? "block" : "uniform");
    a.add("--recompute-num-layers", p.recompute_layers > 0 ? p.recompute_layers : 1);
    a.add("--deepspeed-activation-checkpointing");  // :1524
  }
  // FlashAttention-2 through the flash-attn package (:930); without it, unfused attention.
  if (p.flash_attention) a.add("--use-flash-attn-v2");
  a.add("--micro-batch-size", p.mbs);
  a.add("--global-batch-size", p.gbs > 0 ? p.gbs : w.global_batch);
  switch (w.precision) {
    case Precision::kFp16:
      a.add("--fp16");
      break;
    case Precision::kFp8:
      // --fp8-hybrid with --transformer-impl transformer_engine (:506-519) reaches only
      // ParallelTransformer: with pipelining GPTModelPipe builds ParallelTransformerLayerPipe
      // (megatron/model/gpt_model.py:386-394, silently bf16), and without it the TE layer
      // refuses GQA and takes no SwiGLU or RMSNorm (megatron/model/transformer.py:1757-1800).
      a.refuse(
          "Megatron-DeepSpeed's FP8 (Transformer Engine layers) is built without pipelining "
          "only, refuses GQA and drops SwiGLU/RMSNorm (megatron/model/gpt_model.py:386-394, "
          "megatron/model/transformer.py:1757-1800@f4157be)");
      break;
    default:
      a.add("--bf16");
      break;
  }
  // Gradients accumulate in data_types.grad_accum_dtype (ds_config.json below); bf16 without
  // ZeRO and without pipelining must accumulate in fp32 (deepspeed/runtime/engine.py:1336-1346
  // @v0.16.5, "Bfloat16 wrapper must use a gradient accumulation type of fp32").
  if (!p.main_grads_fp32 && w.precision != Precision::kFp16 && p.zero == 0 && p.pp == 1)
    a.refuse(
        "DeepSpeed accumulates bf16 gradients in fp32 without ZeRO and pipelining "
        "(deepspeed/runtime/engine.py:1344@v0.16.5); the plan keeps 16-bit gradients");
  if (p.pp > 1 && p.recompute == Recompute::kFull && p.recompute_layers > 0)
    a.refuse(
        "Megatron-DeepSpeed's pipeline model recomputes all layers or none "
        "(GPTModelPipe, megatron/model/gpt_model.py:446-452@f4157be): --recompute-layers "
        "would turn recomputation off");
  if (p.rank_order != RankOrder::kTpCpEpDpPp)
    a.refuse(
        fmt::format("Megatron-DeepSpeed numbers ranks its own way (megatron/core/"
                    "parallel_state.py@f4157be has no order option); the plan's rank order "
                    "is {}",
                    to_string(p.rank_order)));
  a.add("--deepspeed");
  a.add("--deepspeed_config", "ds_config.json");
  a.add("--zero-stage", p.zero);  // :1487
  return a;
}

class DeepSpeedEmitter final : public IEmitter {
 public:
  std::span<const FrameworkVersion> versions() const override { return kDeepSpeedVersions; }

  std::string refusal(const EmitInput& in) const override {
    chosen_version(*this, in);
    return mds_args(in).refusal;
  }

  std::vector<EmittedFile> emit(const EmitInput& in) const override {
    const FrameworkVersion& version = chosen_version(*this, in);
    const ModelSpec& m = *in.model;
    const Plan& p = *in.plan;
    const Workload& w = *in.work;
    const int gpn = in.cluster->ranks_per_node();
    const int nodes = in.cluster->nodes();
    ArgList built = mds_args(in);
    if (!built.refusal.empty()) throw InputError({}, "--format", built.refusal);
    const std::vector<std::string>& args = built.args;

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
    // Where gradients accumulate (deepspeed/runtime/config.py:901, engine.py:1013-1028
    // @v0.16.5): the default is bf16 under ZeRO; the plan says (memory_model.cpp).
    ds["data_types"] = {{"grad_accum_dtype", w.precision == Precision::kFp16 ? "fp16"
                                             : p.main_grads_fp32             ? "fp32"
                                                                             : "bf16"}};
    // MoE with pipelining: no activation or gradient partitioning over TP, which DeepSpeed
    // turns on by default (deepspeed/runtime/config.py:462-469@v0.16.5) and Megatron-DeepSpeed
    // does not support for MoE (megatron/model/gpt_model.py:380-384@f4157be).
    if (m.moe && p.pp > 1)
      ds["pipeline"] = {{"pipe_partitioned", false}, {"grad_partitioned", false}};
    nlohmann::ordered_json z;
    z["stage"] = p.zero;
    z["allgather_partitions"] = true;
    z["allgather_bucket_size"] = int64_t{500000000};
    z["reduce_scatter"] = true;
    z["reduce_bucket_size"] = int64_t{500000000};
    z["overlap_comm"] = p.overlap_grad_reduce;
    z["contiguous_gradients"] = true;
    if (p.zero == 3) {
      z["stage3_prefetch_bucket_size"] = int64_t{50000000};
      z["stage3_param_persistence_threshold"] = int64_t{100000};
      z["stage3_max_live_parameters"] = int64_t{1000000000};
      z["stage3_max_reuse_distance"] = int64_t{1000000000};
    }
    ds["zero_optimization"] = z;
    ds["steps_per_print"] = 10;
    ds["wall_clock_breakdown"] = false;

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
    s += fmt::format("# For {}\n", version.description);
    s += fmt::format("# Job: {}\n", comment_safe(in.job_name));
    s += "set -euo pipefail\n";
    s += "cd \"$(dirname \"$0\")\"\n";
    s += "MEGATRON_DS_DIR=\"${MEGATRON_DS_DIR:-.}\"\n";
    // Sequence parallelism requires one CUDA connection (megatron/arguments.py:401-406 @f4157be).
    if (p.sp) s += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
    s += bash_array("ARGS", args);
    // Megatron-DeepSpeed has no mock data (megatron/arguments.py@f4157be): data and a tokenizer
    // are required.
    s += "DATA_ARGS=(--data-path \"${DATA_PATH:?set DATA_PATH to a Megatron .bin/.idx prefix; "
         "Megatron-DeepSpeed has no mock data}\" --tokenizer-type HFTokenizer --tokenizer-model "
         "\"${TOKENIZER_MODEL:?set TOKENIZER_MODEL to a Hugging Face tokenizer name or path}\")\n";
    s += "TRAIN_ARGS=(--train-iters \"${TRAIN_ITERS:-100}\" --lr \"${LR:-1.0e-4}\" --log-interval "
         "1)\n";
    s += save_interval_comment(in);
    s += "CKPT_ARGS=()\n";
    s += fmt::format(
        "if [[ -n \"${{SAVE_DIR:-}}\" ]]; then\n"
        "  CKPT_ARGS=(--save \"$SAVE_DIR\" --load \"$SAVE_DIR\" --save-interval "
        "\"${{SAVE_INTERVAL:-{}}}\")\nfi\n",
        in.save_interval_steps);
    s += fmt::format(
        "deepspeed --num_nodes={} --num_gpus={} --hostfile=hostfile \\\n"
        "  \"$MEGATRON_DS_DIR/pretrain_gpt.py\" \"${{ARGS[@]}}\" \"${{DATA_ARGS[@]}}\" "
        "\"${{TRAIN_ARGS[@]}}\" \"${{CKPT_ARGS[@]}}\" \"$@\"\n",
        nodes, gpn);
    return {{"ds_config.json",
             ds.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", false, ""},
            {"megatron_deepspeed_args.txt", list, false, ""},
            {"hostfile", hosts, false,
             in.hosts.empty() ? "the node names (placeholders node-0 ...; or --nodes-file)" : ""},
            {"train_deepspeed.sh", s, true,
             fmt::format("MEGATRON_DS_DIR (a Megatron-DeepSpeed checkout at f4157be, with "
                         "DeepSpeed {}{} installed), DATA_PATH and TOKENIZER_MODEL (required: "
                         "Megatron data and this model's Hugging Face tokenizer), optionally "
                         "SAVE_DIR for checkpoints, TRAIN_ITERS and LR",
                         version.name, p.flash_attention ? " and flash-attn 2" : "")}};
  }
};

}  // namespace
DTPLAN_REGISTER(IEmitter, DeepSpeedEmitter, "deepspeed",
                "DeepSpeed ds_config.json, Megatron-DeepSpeed arguments, hostfile and launcher")
}  // namespace dtplan
