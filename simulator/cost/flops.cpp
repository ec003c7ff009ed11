#include "simulator/cost/flops.h"

namespace dtplan {

const char* describe(FlopsConvention c) {
  return c == FlopsConvention::kCausalHalf
             ? "Megatron-LM num_floating_point_operations; causal core attention counted as "
               "half of s^2 (Megatron HEAD since 2026-01)"
             : "Megatron-LM num_floating_point_operations; core attention counted over the full "
               "s^2 (the papers' and pre-2026 Megatron convention)";
}

StepFlops step_flops(const ModelSpec& m, const Workload& w, const Plan& p, FlopsConvention conv) {
  return step_flops(m, count_params(m), w, p, conv);
}

StepFlops step_flops(const ModelSpec& m, const ParamCounts& c, const Workload& w, const Plan& p,
                     FlopsConvention conv) {
  const double tokens = static_cast<double>(w.global_batch) * w.seq_len;
  const double h = static_cast<double>(m.hidden);
  const int gate = m.ffn_matrices();
  // GEMM weights touched per token (forward multiply-adds per token).
  const double attention = static_cast<double>(c.attention_per_layer) * m.layers;
  double mlp = static_cast<double>(m.dense_layer_count()) * gate * h * m.ffn_hidden;
  if (m.moe) {
    const MoeSpec& e = *m.moe;
    mlp += static_cast<double>(m.moe_layer_count()) * gate * h *
           (static_cast<double>(e.topk) * e.expert_ffn_hidden +
            static_cast<double>(e.shared_experts) * e.shared_ffn_hidden);
  }
  const double logits = h * static_cast<double>(m.vocab);
  const double c_mask = conv == FlopsConvention::kCausalHalf ? 0.5 : 1.0;
  const double qk = m.mla ? m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim : m.head_dim;
  const double vd = m.mla ? m.mla->v_head_dim : m.head_dim;
  // QK^T and PV: 2 (fwd) x heads x s x (d_qk + d_v) per token per layer, x3 for the step.
  const double core = 3.0 * 2.0 * m.heads * static_cast<double>(w.seq_len) * (qk + vd) * c_mask;
  // Multi-token prediction, as Megatron counts it (training.py num_floating_point_operations,
  // NVIDIA/Megatron-LM @d98e8a6): each module one more layer of the last layer's kind, its
  // norms and 2h -> h projection (3h + 2h^2), and one more pass through the logits.
  double mtp = 0;
  if (m.mtp_layers > 0) {
    double layer = static_cast<double>(c.attention_per_layer);
    if (m.is_moe_layer(m.layers - 1)) {
      const MoeSpec& e = *m.moe;
      layer += gate * h *
               (static_cast<double>(e.topk) * e.expert_ffn_hidden +
                static_cast<double>(e.shared_experts) * e.shared_ffn_hidden);
    } else {
      layer += gate * h * static_cast<double>(m.ffn_hidden);
    }
    mtp = m.mtp_layers *
          (6.0 * (layer + 3 * h + 2 * h * h + h * static_cast<double>(m.vocab)) + core);
  }
  StepFlops f;
  f.model = tokens * (6.0 * (attention + mlp + logits) + core * m.layers + mtp);
  // One extra forward of the layers (no logits) under full recomputation.
  const double layers_fwd = 2.0 * (attention + mlp) + core / 3.0 * m.layers;
  if (p.recompute == Recompute::kFull) {
    double frac = 1.0;
    if (p.recompute_layers > 0) {
      const double per_rank = static_cast<double>(m.layers) / (p.pp * p.vpp);
      frac = std::min(1.0, p.recompute_layers / per_rank);
    }
    f.recompute = tokens * layers_fwd * frac;
  } else if (p.recompute == Recompute::kSelective) {
    // Korthikanti et al. 2022 count selective recomputation as the attention core once more
    // in all three passes: HFU/MFU = (1 + s/3h + V/12hL) / (1 + s/6h + V/12hL). We follow that
    // convention so HFU matches the published HFU figures (REFERENCE.md §1.2, E2).
    f.recompute = tokens * core * m.layers;
  }
  return f;
}

}  // namespace dtplan
