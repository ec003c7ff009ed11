#include "simulator/cost/memory_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/units.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {

double grad_bytes_per_param(const Plan& p, Precision precision) {
  return p.main_grads_fp32 && precision != Precision::kFp16 ? 4.0 : 2.0;
}

double fp8_weight_copy_bytes_per_param(Fp8Recipe r) {
  // The FP8 copy (1 B) and its transpose (1 B); MXFP8 adds one E8M0 scale byte per 32 elements
  // to each (OCP Microscaling spec v1.0 §5: block size 32); blockwise scaling one fp32 scale
  // per 128 x 128 weight block to each (DeepSeek-V3 report §3.3.2, the recipe TE's blockwise
  // implements).
  switch (r) {
    case Fp8Recipe::kMxfp8:
      return 2.0 * (1.0 + 1.0 / 32.0);
    case Fp8Recipe::kBlockwise:
      return 2.0 * (1.0 + 4.0 / (128.0 * 128.0));
    case Fp8Recipe::kDelayed:
    case Fp8Recipe::kTensorwise:
      break;
  }
  return 2.0;
}

double linear_input_bytes_per_element(const Workload& w) {
  if (w.precision != Precision::kFp8) return 2.0;
  return w.fp8_recipe == Fp8Recipe::kMxfp8 ? 1.0 + 1.0 / 32.0 : 1.0;
}

double fp8_meta_bytes_per_gemm(const Workload& w) {
  // Transformer Engine keeps per FP8 GEMM 3 forward tensors (input, weight, output) and 2
  // backward ones (gradient in and out), each with a fp32 scale and scale_inv and, under
  // delayed scaling, a fp32 amax history of the recipe's length (TE v1.13
  // transformer_engine/pytorch/module/base.py set_meta_tensor). Per-tensor current scaling
  // keeps no history; MXFP8 and blockwise scales travel with the tensors (counted there).
  constexpr double kTensors = 5, kScaleBytes = 8, kAmaxBytes = 4;
  if (w.fp8_recipe == Fp8Recipe::kDelayed)
    return kTensors * (kScaleBytes + kAmaxBytes * std::max(1, w.fp8_amax_history_len));
  return w.fp8_recipe == Fp8Recipe::kTensorwise ? kTensors * kScaleBytes : 0.0;
}

double fp8_gemms_on_rank(const ModelSpec& m, const Plan& p, const RankLayers& l) {
  // Megatron's linear layers: QKV (MLA: q down/up, kv down/up) and output projections, fc1
  // (gate and up fused) and fc2; an MoE layer's local experts two each, shared experts two.
  const double attention = m.mla ? 5 : 2;
  double gemms = l.total() * attention + l.dense * 2.0;
  if (m.moe)
    gemms += l.moe * (2.0 * m.moe->experts / std::max(1, p.ep) + 2.0 * m.moe->shared_experts);
  return gemms;
}

double linear_params_on_rank(const ModelSpec& m, const ParamCounts& c, const Plan& p,
                             const RankLayers& l) {
  const double t = p.tp;
  double out = l.total() * static_cast<double>(c.attention_per_layer) / t +
               l.dense * static_cast<double>(c.dense_mlp_per_layer) / t;
  if (m.moe)
    out += l.moe * (static_cast<double>(c.shared_per_moe_layer) / t +
                    static_cast<double>(c.experts_per_moe_layer) / (p.ep * p.etp));
  return out;
}

ParamsOnRank params_on_rank(const ModelSpec& m, const Plan& p, int rank) {
  return params_on_rank(m, count_params(m), p, rank, layers_on_rank(m, p, rank));
}

ParamsOnRank params_on_rank(const ModelSpec& m, const ParamCounts& c, const Plan& p, int rank,
                            const RankLayers& l) {
  const double t = p.tp;
  ParamsOnRank out;
  // TP-sharded attention and MLP; norms replicated.
  out.dense += l.total() * (static_cast<double>(c.attention_per_layer) / t +
                            static_cast<double>(c.norms_per_layer));
  out.dense += l.dense * static_cast<double>(c.dense_mlp_per_layer) / t;
  if (m.moe) {
    out.dense += l.moe * (static_cast<double>(c.shared_per_moe_layer) / t +
                          static_cast<double>(c.router_per_moe_layer));
    out.expert += l.moe * static_cast<double>(c.experts_per_moe_layer) / (p.ep * p.etp);
  }
  const double emb = static_cast<double>(m.vocab) * m.hidden / t;
  if (rank == 0) out.dense += emb + static_cast<double>(c.position);
  // The loss rank (the last, or rank 0 in a V) holds the output layer: its own matrix, or a
  // copy of the tied embedding when the embedding lives on another rank.
  const int lr = loss_rank(p);
  if (rank == lr && (!m.tied_embeddings || lr != 0)) out.dense += emb;
  if (rank == lr) out.dense += static_cast<double>(m.hidden);  // final norm
  // Multi-token prediction (its transformer layers are among `l`): per module a 2h -> h
  // projection, TP-sharded, and its norms (ParamCounts::mtp less the layer); and the
  // embedding, which Megatron-Core builds on the last stage too when it runs MTP
  // (gpt_model.py: `if self.pre_process or self.mtp_process: self.embedding = ...`,
  // NVIDIA/Megatron-LM @d98e8a6) unless that stage already holds it (a V) or its tied copy.
  if (rank == lr && m.mtp_layers > 0) {
    const double h = static_cast<double>(m.hidden);
    const double block =
        static_cast<double>(c.attention_per_layer + c.norms_per_layer) +
        (m.moe ? static_cast<double>(c.experts_per_moe_layer + c.shared_per_moe_layer +
                                     c.router_per_moe_layer)
               : static_cast<double>(c.dense_mlp_per_layer));
    const double norms = static_cast<double>(c.mtp) / m.mtp_layers - 2 * h * h - block;
    out.dense += m.mtp_layers * (2 * h * h / t + norms);
    if (lr != 0 && !m.tied_embeddings) out.dense += emb;
  }
  out.linear = linear_params_on_rank(m, c, p, l);
  return out;
}

double layer_activation_bytes(const ModelSpec& m, const Workload& w, const Plan& p, bool moe) {
  const double t = p.tp;
  const double sp_div = p.sp ? t : 1.0;
  const double h = static_cast<double>(m.hidden);
  const double tokens = static_cast<double>(p.mbs) * w.seq_len / p.cp;
  const double heads_local = std::max(1.0, m.heads / t);
  const double q_local = static_cast<double>(m.q_width()) / t;
  const double kv_local = m.mla
                              ? heads_local * (m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim)
                              : std::max<double>(m.head_dim, static_cast<double>(m.kv_width()) / t);
  const double v_local = m.mla ? heads_local * m.mla->v_head_dim : kv_local;
  if (p.recompute == Recompute::kFull && p.recompute_layers == 0)
    return tokens * 2.0 * h / sp_div;  // only the layer input is kept

  // Per token, 16-bit activations and 1-byte dropout masks (Korthikanti 2022 Table 2 terms). A
  // mask exists only where its dropout does (Llama-family models train without: torch's
  // dropout returns its input for p = 0 and keeps no mask). Under FP8 training, Transformer
  // Engine's linear layers keep their input for the weight-gradient GEMM as the quantized copy
  // (1 byte, plus MXFP8's one scale byte per 32 elements) instead of the 16-bit tensor
  // (TE transformer_engine/pytorch/module/linear.py and layernorm_linear.py save the quantized
  // input; docs/performance-model.md §4).
  double per_token = 0;
  const double lin_in = linear_input_bytes_per_element(w);
  const double hid_mask = m.hidden_dropout > 0 ? 1.0 : 0.0;
  // Attention: norm input, QKV input, Q K V, projection input, dropout mask.
  per_token += 2 * h / sp_div + lin_in * h / sp_div + 2 * (q_local + kv_local + v_local) +
               lin_in * heads_local * (m.mla ? m.mla->v_head_dim : m.head_dim) +
               hid_mask * h / sp_div;
  if (!p.flash_attention && p.recompute != Recompute::kSelective) {
    // Softmax output (2) and, with attention dropout, its mask (1) and output (2), over s keys
    // per head: 5 a s / t (Korthikanti's term), 2 a s / t without dropout.
    per_token +=
        (m.attention_dropout > 0 ? 5.0 : 2.0) * heads_local * static_cast<double>(w.seq_len);
  } else if (p.flash_attention) {
    per_token += 4.0 * heads_local;  // log-sum-exp statistics
  }
  const int gate = m.ffn_matrices() - 1;  // 1 (gelu) or 2 (swiglu) fc1 outputs
  // fc1 input, fc1 output(s) kept for the activation's backward, fc2 input.
  auto mlp = [&](double width_local, double pairs) {
    return pairs * (lin_in * h + 2 * gate * width_local + lin_in * width_local);
  };
  per_token += 2 * h / sp_div + hid_mask * h / sp_div;  // post-attention norm input, mask
  if (!moe) {
    per_token += mlp(static_cast<double>(m.ffn_hidden) / t, 1.0) - lin_in * h + lin_in * h / sp_div;
  } else {
    const MoeSpec& e = *m.moe;
    const double pairs = static_cast<double>(e.topk) * p.etp / t;
    per_token += mlp(static_cast<double>(e.expert_ffn_hidden) / p.etp, pairs);
    per_token += 2 * h / sp_div + 4.0 * e.experts / sp_div;  // router input and probabilities
    if (e.shared_experts > 0)
      per_token += mlp(static_cast<double>(e.shared_ffn_hidden) * e.shared_experts / t, 1.0);
  }
  double bytes = tokens * per_token;
  if (p.recompute == Recompute::kFull && p.recompute_layers > 0) {
    // Callers scale by the recomputed share; this is the full-activation figure.
  }
  return bytes;
}

ActivationInputs activation_inputs(const ModelSpec& m, const Workload& w, const Plan& p) {
  ActivationInputs a;
  a.dense = layer_activation_bytes(m, w, p, false);
  a.moe = m.moe ? layer_activation_bytes(m, w, p, true) : 0;
  Plan none = p;
  none.recompute = Recompute::kNone;
  none.recompute_layers = 0;
  a.full_dense = layer_activation_bytes(m, w, none, false);
  a.full_moe = m.moe ? layer_activation_bytes(m, w, none, true) : 0;
  return a;
}

double embedding_mask_bytes(const ModelSpec& m, const Workload& w, const Plan& p) {
  if (m.hidden_dropout <= 0) return 0;
  const double tokens = static_cast<double>(p.mbs) * w.seq_len / p.cp;
  return tokens * static_cast<double>(m.hidden) / (p.sp ? p.tp : 1);
}

double loss_scratch_bytes(const ModelSpec& m, const Workload& w, const Plan& p) {
  // Logits (16-bit) and fp32 cross-entropy scratch, and the 16-bit final hidden states.
  const double tokens = static_cast<double>(p.mbs) * w.seq_len / p.cp;
  return tokens * static_cast<double>(m.vocab) / p.tp * (2 + 4) +
         tokens * 2.0 * static_cast<double>(m.hidden) / (p.sp ? p.tp : 1);
}

double runtime_buffer_bytes(const Plan& p) {
  int communicators = 1;  // world/DP
  for (int deg : {p.tp, p.cp, p.pp, p.ep}) communicators += deg > 1 ? 1 : 0;
  return p.cuda_context_bytes + communicators * kNcclBytesPerCommunicator;
}

double offloaded_activation_bytes(const Plan& p, const RankLayers& l, const ActivationInputs& a) {
  if (p.offload_layers <= 0 || p.recompute == Recompute::kFull) return 0;
  const RankLayers off = offloaded_layers(p, l);
  return off.dense * a.dense + off.moe * a.moe;
}

double offloaded_host_bytes(const ModelSpec& m, const Workload& w, const Plan& p) {
  if (p.offload_layers <= 0 || p.recompute == Recompute::kFull) return 0;
  return offloaded_activation_bytes(p, layers_on_rank(m, p, 0), activation_inputs(m, w, p));
}

std::string host_memory_violation(const ModelSpec& m, const Workload& w, const Plan& p,
                                  const HardwareProfile& hw) {
  if (p.offload_layers <= 0 || hw.host.memory_gib <= 0) return {};
  const double per_node = offloaded_host_bytes(m, w, p) * std::max(1, hw.node.gpus_per_node);
  if (per_node <= hw.host.memory_gib * units::kGiB) return {};
  return fmt::format(
      "offloaded activations need {:.0f} GiB of host memory per node ({} GPUs x {:.1f} GiB), "
      "more than the {:.0f} GiB of profile {} (host.memory_gib)",
      per_node / units::kGiB, hw.node.gpus_per_node,
      per_node / std::max(1, hw.node.gpus_per_node) / units::kGiB, hw.host.memory_gib, hw.name);
}

StageMemory stage_memory(const ModelSpec& m, const Workload& w, const Plan& p,
                         const IPipelineSchedule& schedule, int rank) {
  return stage_memory(m, w, p, schedule, rank, count_params(m), activation_inputs(m, w, p),
                      layers_on_rank(m, p, rank));
}

StageMemory stage_memory(const ModelSpec& m, const Workload& w, const Plan& p,
                         const IPipelineSchedule& schedule, int rank, const ParamCounts& counts,
                         const ActivationInputs& act, const RankLayers& l,
                         const ParamsOnRank* params) {
  StageMemory s;
  s.layers = l.total();
  const ParamsOnRank prm = params ? *params : params_on_rank(m, counts, p, rank, l);
  const double d = std::max(1, p.dp * p.cp);
  const double de = std::max(1, p.edp());
  auto shard = [&](double bytes_per_param, int min_stage) {
    return p.zero >= min_stage ? prm.dense * bytes_per_param / d + prm.expert * bytes_per_param / de
                               : prm.total() * bytes_per_param;
  };
  const int copies = schedule.parameter_copies();
  s.weights_bytes = copies * shard(2.0, 3);
  s.grads_bytes = copies * shard(grad_bytes_per_param(p, w.precision), 2);
  s.optimizer_bytes = copies * shard(p.optimizer_state_bytes_per_param, 1);
  // FP8 training (Transformer Engine) keeps, beside each 16-bit linear weight, its FP8 copy and
  // the copy's transpose for the backward's data-gradient GEMM (Hopper's FP8 GEMMs take only
  // the TN layout), cached across the micro-batches of a step: 2 bytes per linear parameter.
  // Embedding, output layer, norms and router stay in 16-bit. With ZeRO-3 only the gathered
  // layer has them (buffers below).
  const bool fp8 = w.precision == Precision::kFp8;
  if (fp8 && p.zero < 3) {
    const double linear = linear_params_on_rank(m, counts, p, l);
    s.weights_bytes += copies * fp8_weight_copy_bytes_per_param(w.fp8_recipe) * linear;
  }

  // Activations: in-flight micro-batches x this rank's layers.
  const double inflight = schedule.inflight_microbatches(rank, p.pp, p.vpp, p.num_microbatches());
  const double dense_act = act.dense;
  const double moe_act = act.moe;
  double per_mb = l.dense * dense_act + l.moe * moe_act;
  // Activation offloading: the offloaded layers (the first of each chunk, dense ones first) keep
  // nothing on the GPU but the one whose copy is in flight (offloaded_layers()).
  if (p.offload_layers > 0 && p.recompute != Recompute::kFull) {
    const RankLayers off = offloaded_layers(p, l);
    per_mb -= offloaded_activation_bytes(p, l, act);
    if (off.total() > 0) per_mb += off.moe > 0 ? moe_act : dense_act;
  }
  const double tokens = static_cast<double>(p.mbs) * w.seq_len / p.cp;
  const double sp_div = p.sp ? p.tp : 1;
  if (p.recompute == Recompute::kFull) {
    const double full_dense = act.full_dense;
    const double full_moe = act.full_moe;
    const double input_only = tokens * 2.0 * m.hidden / sp_div;
    if (p.recompute_layers > 0) {
      // The recomputed layers keep only their input; the others keep everything.
      const RankLayers rec = recomputed_layers(p, l);
      per_mb = rec.total() * input_only + (l.dense - rec.dense) * full_dense +
               (l.moe - rec.moe) * full_moe;
    } else {
      per_mb = l.total() * input_only;
    }
    // While one layer is recomputed and back-propagated its full activations exist once.
    s.activations_bytes += std::max(full_dense, full_moe);
  }
  s.activations_bytes += inflight * per_mb;
  if (rank == 0) s.activations_bytes += inflight * embedding_mask_bytes(m, w, p);
  if (rank == loss_rank(p))
    s.activations_bytes += schedule.loss_inflight_microbatches(p.pp, p.vpp, p.num_microbatches()) *
                           loss_scratch_bytes(m, w, p);

  s.buffers_bytes = runtime_buffer_bytes(p);
  if (fp8) s.buffers_bytes += copies * fp8_gemms_on_rank(m, p, l) * fp8_meta_bytes_per_gemm(w);
  if (p.zero >= 3) {
    // The gathered 16-bit parameters of the largest layer and their 16-bit gradients before the
    // reduce-scatter: DeepSpeed's estimate_zero3_model_states_mem_needs 4 x largest layer
    // (REFERENCE.md §2.1, worked example E4).
    const ParamCounts& c = counts;
    double largest = static_cast<double>(c.attention_per_layer + c.dense_mlp_per_layer);
    if (m.moe)
      largest =
          std::max(largest, static_cast<double>(c.attention_per_layer + c.shared_per_moe_layer +
                                                static_cast<double>(c.experts_per_moe_layer) /
                                                    (static_cast<double>(p.ep) * p.etp)));
    s.buffers_bytes += (fp8 ? 6.0 : 4.0) * largest / p.tp;  // FP8 copy and transpose
  }
  return s;
}

}  // namespace dtplan
