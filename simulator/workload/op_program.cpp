#include "simulator/workload/op_program.h"

#include <algorithm>
#include <cstring>

namespace dtplan {

double fp8_quantize_bytes_per_element(Fp8Recipe r, bool non_tn_gemm, Fp8Tensor t) {
  // TE @d0067d0: common/cast/dispatch/quantize.cuh (cast_transpose writes both copies from one
  // read), pytorch/csrc/quantizer.cpp:980-1029 (current scaling: compute_amax, then cast),
  // pytorch/csrc/extensions/normalization.cpp:94-131 (norm + FP8 fusion),
  // common/recipe/__init__.py:337-352 (MXFP8/blockwise: both directions from the BF16 input).
  // MXFP8: one E8M0 scale per 32 elements per direction; blockwise 1x128: one fp32 per 128.
  const double copies = non_tn_gemm ? 1.0 : 2.0;  // per-tensor scaling: FP8 and its transpose
  switch (r) {
    case Fp8Recipe::kDelayed:
      if (t == Fp8Tensor::kInputAfterNorm) return non_tn_gemm ? 0.0 : 2.0;  // FP8 transpose
      return 2.0 + copies;
    case Fp8Recipe::kTensorwise:
      if (t == Fp8Tensor::kInputAfterNorm) return 2.0 + copies;  // norm gave the amax
      return 4.0 + copies;                                       // amax pass + cast
    case Fp8Recipe::kMxfp8:
      return 2.0 + 2.0 * (1.0 + 1.0 / 32.0);
    case Fp8Recipe::kBlockwise:
      return 2.0 + 2.0 + (t == Fp8Tensor::kWeight ? 0.0 : 2.0 * 4.0 / 128.0);
  }
  return 0;
}

int fp8_quantize_kernels(Fp8Recipe r, Fp8Tensor t) {
  // Current scaling: zero_amax, amax, compute_scale, cast (quantizer.cpp:980-1029,
  // common/recipe/current_scaling.cu:24-76,267); after a norm only the cast.
  if (r == Fp8Recipe::kTensorwise && t != Fp8Tensor::kInputAfterNorm) return 4;
  return 1;
}

namespace {
// C(a, k) / C(b, k) for real a <= b: the chance that k draws without replacement from b items
// all miss the b - a items.
double choose_ratio(double a, double b, int k) {
  double r = 1;
  for (int i = 0; i < k; ++i) {
    if (a - i <= 0) return 0;
    r *= (a - i) / (b - i);
  }
  return r;
}
double binomial(int n, int k) {
  if (k < 0 || k > n) return 0;
  double r = 1;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}
}  // namespace

double moe_node_dedup_share(const MoeSpec& e, int nodes) {
  if (nodes <= 1 || e.experts <= 0 || e.topk <= 1) return 1.0;
  const double experts = e.experts, k = e.topk;
  const double per_node = experts / nodes;
  double touch = 0;  // P(a given node receives the token)
  const RouterSpec& r = e.router;
  if (r.groups > 1 && r.group_topk >= 1 && r.group_topk < r.groups && e.experts % r.groups == 0) {
    // The token picks group_topk of the groups, then its experts among theirs.
    const double per_group = experts / r.groups, pool = r.group_topk * per_group;
    if (per_group >= per_node) {  // the node lies inside one group
      touch = static_cast<double>(r.group_topk) / r.groups *
              (1.0 - choose_ratio(pool - per_node, pool, e.topk));
    } else {  // the node holds q whole groups: j of them chosen, hypergeometrically
      const int q = std::max(1, static_cast<int>(per_node / per_group + 0.5));
      const double all = binomial(r.groups, r.group_topk);
      for (int j = 1; j <= std::min(q, r.group_topk); ++j)
        touch += binomial(q, j) * binomial(r.groups - q, r.group_topk - j) / all *
                 (1.0 - choose_ratio(pool - j * per_group, pool, e.topk));
    }
  } else {
    touch = 1.0 - choose_ratio(experts - per_node, experts, e.topk);
  }
  return std::clamp(nodes * touch / k, 0.0, 1.0);
}

const char* to_string(CommDim d) {
  switch (d) {
    case CommDim::kTP:
      return "tp";
    case CommDim::kCP:
      return "cp";
    case CommDim::kEP:
      return "ep";
    case CommDim::kPP:
      return "pp";
    case CommDim::kDP:
      return "dp";
  }
  return "?";
}

static GroupPlacement place(int size, int stride, int gpus_per_node, int num_gpus) {
  GroupPlacement g;
  g.size = std::max(1, size);
  if (g.size == 1) return g;
  g.node_gpus_busy = std::min(gpus_per_node, num_gpus);
  const int64_t span = static_cast<int64_t>(stride) * g.size;  // ranks from first to last member
  if (stride >= gpus_per_node) {
    g.ranks_per_node = 1;  // every member on its own node
  } else if (span <= gpus_per_node && gpus_per_node % span != 0) {
    // Groups that do not tile the node (tp = 3 on 8 GPUs): some straddle two nodes, and a
    // collective runs at the pace of its slowest group.
    g.ranks_per_node = std::max(1, g.size / 2);
    g.nodes = 2;
    return g;
  } else {
    g.ranks_per_node = std::min(g.size, std::max(1, gpus_per_node / stride));
  }
  g.nodes = (g.size + g.ranks_per_node - 1) / g.ranks_per_node;
  return g;
}

Placements place_groups(const Plan& p, const HardwareProfile& hw, int num_gpus) {
  // The NVLink domain a job fills is what "node" means for placement (64 of an NVL72 rack's 72
  // GPUs: core/hardware.h); its scale-out bandwidth is all its trays' NICs (link_rates).
  const int g = std::max(1, hw.node.placement_domain_gpus());
  Placements out;
  // Dense grid: order of the dims in the rank order, innermost first (ep is carved out of
  // cp x dp and has its own grid below).
  int stride = 1;
  const bool pp_in_dp = pp_inside_dp(p.rank_order);
  out.tp = place(p.tp, stride, g, num_gpus);
  stride *= p.tp;
  out.cp = place(p.cp, stride, g, num_gpus);
  stride *= p.cp;
  if (pp_in_dp) {
    out.pp = place(p.pp, stride, g, num_gpus);
    stride *= p.pp;
    out.dp = place(p.dp * p.cp, p.tp, g, num_gpus);  // gradient reduce spans dp x cp
    out.dp.size = p.dp * p.cp;
  } else {
    out.dp = place(p.dp, stride, g, num_gpus);
    stride *= p.dp;
    out.pp = place(p.pp, stride, g, num_gpus);
  }
  // Gradients are reduced over dp x cp ranks (CP ranks hold the same weights).
  if (p.cp > 1 && !pp_in_dp) {
    out.dp = place(p.dp * p.cp, p.tp, g, num_gpus);
  }
  // Expert grid: etp innermost, then ep, then expert-data-parallel.
  out.etp = place(p.etp, 1, g, num_gpus);
  out.ep = place(p.ep, p.etp, g, num_gpus);
  out.edp = place(p.edp(), p.etp * p.ep, g, num_gpus);
  // Pipeline send/recv goes to one peer, but every GPU of the node sends its own stage
  // boundary at the same time (one NIC rail each on a rail-optimized fabric).
  out.pp.ranks_per_node = 1;
  return out;
}

namespace {

// Builds forward ops into a scratch list, then appends the mirrored backward ops.
struct Builder {
  const ModelSpec& m;
  const Workload& w;
  const Plan& p;
  const Placements& g;
  const HardwareProfile& hw;
  LayerOps fwd;

  double act_bytes() const { return 2.0; }  // bf16/fp16 activations (fp8 only inside GEMMs)
  // The 1-byte dropout mask a hidden dropout writes (none without dropout).
  double mask_bytes() const { return m.hidden_dropout > 0 ? 1.0 : 0.0; }

  // A GEMM. Under FP8 training a GEMM with weights (a Transformer Engine linear layer) reads
  // FP8 copies of its input, made by a quantization kernel before it, and of its output
  // gradient, made before its backward (fp8_quantize_bytes_per_element, op_program.h; the
  // weight's once per step is the optimizer's). `input` says what produced the input: a norm
  // fused with the quantization (Megatron's TELayerNormColumnParallelLinear) or not. A GEMM
  // without weights (unfused attention's batched matmuls) and a `high_precision` one stay in
  // 16 bits.
  void gemm(const char* name, int64_t M, int64_t N, int64_t K, int count = 1, bool weights = true,
            bool selective = false, bool grouped = false, Fp8Tensor input = Fp8Tensor::kInput,
            bool high_precision = false) {
    const bool quantized = w.precision == Precision::kFp8 && weights && !high_precision;
    const double copies = static_cast<double>(count);
    if (quantized)
      quantize("fp8_quantize_input", static_cast<double>(M) * K * copies, input,
               OpPasses::kForwardOnly);
    Op o;
    o.grouped = grouped;
    o.kind = OpKind::kGemm;
    o.name = name;
    o.m = M;
    o.n = N;
    o.k = K;
    o.count = count;
    o.selective = selective;
    o.has_weights = weights;
    o.high_precision = high_precision || (w.precision == Precision::kFp8 && !weights);
    fwd.push(o);
    if (quantized)
      quantize("fp8_quantize_grad", static_cast<double>(M) * N * copies, Fp8Tensor::kOutputGradient,
               OpPasses::kBackwardOnly);
  }
  void quantize(const char* name, double elements, Fp8Tensor t, OpPasses passes) {
    const double bytes =
        elements * fp8_quantize_bytes_per_element(w.fp8_recipe, hw.gpu.fp8_non_tn_gemm, t);
    if (bytes <= 0) return;  // fused away (delayed scaling after a norm on Blackwell)
    Op o;
    o.kind = OpKind::kElementwise;
    o.name = name;
    o.bytes = bytes;
    o.kernels = fp8_quantize_kernels(w.fp8_recipe, t);
    o.passes = passes;
    fwd.push(o);
  }
  void elementwise(const char* name, double bytes, bool selective = false, int kernels = 1) {
    Op o;
    o.kind = OpKind::kElementwise;
    o.name = name;
    o.bytes = bytes;
    o.selective = selective;
    o.kernels = kernels;
    fwd.push(o);
  }
  void attention(const char* name, double flops, double bytes, int64_t seq, int head_dim) {
    Op o;
    o.kind = OpKind::kAttention;
    o.name = name;
    o.flops = flops;
    o.bytes = bytes;
    o.attn_seq = seq;
    o.attn_head_dim = head_dim;
    o.selective = true;
    fwd.push(o);
  }
  void collective(const char* name, CollectiveOp op, CommDim dim, const GroupPlacement& pl,
                  double bytes, bool overlappable = false) {
    if (pl.size <= 1 || bytes <= 0) return;
    Op o;
    o.kind = OpKind::kCollective;
    o.name = name;
    o.collective = op;
    o.dim = dim;
    o.group = pl;
    o.bytes = bytes;
    o.overlappable = overlappable;
    fwd.push(o);
  }
};

// Tensor-parallel collectives around a block: Megatron's f/g conjugate operators.
// Forward: entering a TP region is an identity (SP: all-gather), leaving it an all-reduce
// (SP: reduce-scatter). The backward mirrors them.
void tp_enter(Builder& b, double bytes) {
  if (b.p.sp) b.collective("tp_allgather", CollectiveOp::kAllGather, CommDim::kTP, b.g.tp, bytes);
}
void tp_exit(Builder& b, double bytes) {
  b.collective(b.p.sp ? "tp_reducescatter" : "tp_allreduce",
               b.p.sp ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, CommDim::kTP,
               b.g.tp, bytes);
}

void attention_block(Builder& b, int64_t T, double Tn) {
  const ModelSpec& m = b.m;
  const Plan& p = b.p;
  const double h = static_cast<double>(m.hidden);
  const double ab = b.act_bytes();
  const int t = p.tp;
  const double full = static_cast<double>(T) * h * ab;  // one [T, h] activation, unsharded
  b.elementwise("input_norm", Tn * h * 2 * ab);
  tp_enter(b, full);
  const int64_t heads_local = std::max(1, m.heads / t);
  int64_t qkv_n;
  int64_t q_local, v_head;
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    const int64_t qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim;
    // Down-projections are replicated across TP (small); up-projections are head-sharded.
    if (a.q_lora_rank > 0) {
      b.gemm("q_down", T, a.q_lora_rank, m.hidden);
      b.gemm("q_up", T, heads_local * qk_head, a.q_lora_rank, 1, true, false, false,
             Fp8Tensor::kInputAfterNorm);
    } else {
      b.gemm("q_proj", T, heads_local * qk_head, m.hidden);
    }
    b.gemm("kv_down", T, a.kv_lora_rank + a.qk_rope_head_dim, m.hidden);
    b.gemm("kv_up", T, heads_local * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, 1, true,
           false, false, Fp8Tensor::kInputAfterNorm);
    q_local = heads_local * qk_head;
    v_head = a.v_head_dim;
    qkv_n = 0;
  } else {
    const int64_t kv_local =
        std::max<int64_t>(m.head_dim, m.kv_width() / t);  // replicated when tp > kv_heads
    qkv_n = heads_local * m.head_dim + 2 * kv_local;
    q_local = heads_local * m.head_dim;
    v_head = m.head_dim;
    b.gemm("qkv", T, qkv_n, m.hidden, 1, true, false, false, Fp8Tensor::kInputAfterNorm);
  }
  // Context parallelism: ring exchange of K and V (GQA shrinks it), overlapped with attention.
  if (p.cp > 1) {
    const double kv_bytes =
        static_cast<double>(T) * 2.0 *
        (m.mla ? heads_local * (m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim + v_head) / 2.0
               : std::max<double>(m.head_dim, static_cast<double>(m.kv_width()) / t)) *
        ab;
    b.collective("cp_kv_exchange", CollectiveOp::kSendRecv, CommDim::kCP, b.g.cp,
                 (p.cp - 1) * kv_bytes, true);
  }
  const double s_q = static_cast<double>(b.w.seq_len) / p.cp;
  const double s_kv = static_cast<double>(b.w.seq_len);
  const double batch_heads = static_cast<double>(p.mbs) * heads_local;
  const int64_t qk_dim = m.mla ? m.mla->qk_nope_head_dim + m.mla->qk_rope_head_dim : m.head_dim;
  if (p.flash_attention) {
    // Causal: half of the score matrix is computed (load-balanced across CP ranks).
    const double flops = 2.0 * batch_heads * s_q * s_kv * (qk_dim + v_head) * 0.5;
    const double bytes =
        static_cast<double>(T) * (q_local * 2 + heads_local * v_head * 2.0 + 2.0 * q_local) * ab;
    b.attention("flash_attention", flops, bytes, static_cast<int64_t>(s_q),
                static_cast<int>(qk_dim));
  } else {
    // Unfused (Megatron fused scale-mask-softmax): full s x s scores, softmax and, where the
    // model has attention dropout, its dropout with a 1-byte mask.
    const double elems = batch_heads * s_q * s_kv;
    const int bh = static_cast<int>(batch_heads);
    // Split Q/K/V into heads and make them contiguous for the batched GEMMs.
    b.elementwise("qkv_layout", static_cast<double>(T) * (qkv_n > 0 ? qkv_n : 3 * q_local) * 2 * ab,
                  true, 3);
    b.gemm("attn_scores", static_cast<int64_t>(s_q), static_cast<int64_t>(s_kv), qk_dim, bh, false,
           true);
    b.elementwise("softmax", elems * 2 * ab, true);
    if (m.attention_dropout > 0) b.elementwise("attn_dropout", elems * (2 * ab + 1), true);
    b.gemm("attn_context", static_cast<int64_t>(s_q), v_head, static_cast<int64_t>(s_kv), bh, false,
           true);
    b.elementwise("context_layout", static_cast<double>(T) * q_local * 2 * ab, true, 1);
  }
  b.gemm("attn_out", T, m.hidden, heads_local * v_head);
  tp_exit(b, full);
  b.elementwise("dropout_residual", Tn * h * (3 * ab + b.mask_bytes()), false, 2);
}

// `after_norm`: fc1 is Megatron's TELayerNormColumnParallelLinear (the dense MLP); an MoE
// layer's shared experts follow a separate norm (gpt_layer_specs.py @d98e8a6).
void dense_mlp(Builder& b, int64_t T, int64_t width, const char* fc1, const char* fc2,
               bool after_norm) {
  const ModelSpec& m = b.m;
  const double ab = b.act_bytes();
  const int64_t f_local = width / b.p.tp;
  const int gate = m.ffn_act == FfnAct::kSwiglu ? 2 : 1;
  b.gemm(fc1, T, gate * f_local, m.hidden, 1, true, false, false,
         after_norm ? Fp8Tensor::kInputAfterNorm : Fp8Tensor::kInput);
  b.elementwise("activation", static_cast<double>(T) * f_local * (gate + 1) * ab);
  b.gemm(fc2, T, m.hidden, f_local);
}

void mlp_block(Builder& b, int64_t T, double Tn, bool moe) {
  const ModelSpec& m = b.m;
  const Plan& p = b.p;
  const double h = static_cast<double>(m.hidden);
  const double ab = b.act_bytes();
  const double full = static_cast<double>(T) * h * ab;
  b.elementwise("post_attn_norm", Tn * h * 2 * ab);
  if (!moe) {
    tp_enter(b, full);
    dense_mlp(b, T, m.ffn_hidden, "fc1", "fc2", true);
    tp_exit(b, full);
  } else {
    const MoeSpec& e = *m.moe;
    // Router on this rank's tokens (sequence-sharded with SP).
    const auto Tr = static_cast<int64_t>(Tn);
    b.gemm("router", Tr, e.experts, m.hidden, 1, true, false, false, Fp8Tensor::kInput, true);
    b.elementwise("router_topk", Tn * e.experts * 4.0 * 2, false, 3);
    // Token-expert pairs this rank computes with balanced routing: T*K*ep*etp/(E*tp) per
    // local expert, E/ep local experts (derivation in docs/performance-model.md).
    const double pairs = static_cast<double>(T) * e.topk * p.etp / p.tp;
    const int local_experts = std::max(1, e.experts / p.ep);
    const auto per_expert = static_cast<int64_t>(std::max(1.0, pairs / local_experts));
    b.elementwise("permute", pairs * h * 2 * ab, false, 2);
    const double a2a = pairs * h * ab;
    // DeepEP / HybridEP send a token once per destination node (moe_node_dedup_share).
    GroupPlacement ep = b.g.ep;
    if (p.moe_dispatcher != MoeDispatcher::kAllToAll && ep.crosses_nodes())
      ep.remote_share = moe_node_dedup_share(e, ep.nodes);
    b.collective("ep_dispatch", CollectiveOp::kAllToAll, CommDim::kEP, ep, a2a, p.ep_comm_overlap);
    const int gate = m.ffn_act == FfnAct::kSwiglu ? 2 : 1;
    const int64_t fe_local = e.expert_ffn_hidden / p.etp;
    b.gemm("expert_fc1", per_expert, gate * fe_local, m.hidden, local_experts, true, false, true);
    b.elementwise("expert_activation", pairs * fe_local * (gate + 1) * ab);
    b.gemm("expert_fc2", per_expert, m.hidden, fe_local, local_experts, true, false, true);
    b.collective("ep_combine", CollectiveOp::kAllToAll, CommDim::kEP, ep, a2a, p.ep_comm_overlap);
    b.elementwise("unpermute", pairs * h * 2 * ab, false, 2);
    if (e.shared_experts > 0) {
      tp_enter(b, full);
      dense_mlp(b, T, e.shared_ffn_hidden * e.shared_experts, "shared_fc1", "shared_fc2", false);
      tp_exit(b, full);
    }
  }
  b.elementwise("dropout_residual", Tn * h * (3 * ab + b.mask_bytes()), false, 2);
}

// Appends the forward list and its mirrored backward to `out`.
void emit_with_backward(const LayerOps& fwd, bool sp, LayerOps& out) {
  for (const Op& o : fwd)
    if (o.passes != OpPasses::kBackwardOnly) out.push(o);
  for (int i = fwd.size() - 1; i >= 0; --i) {
    Op f = fwd[i];
    if (f.passes == OpPasses::kForwardOnly) continue;
    if (f.passes == OpPasses::kBackwardOnly) {  // already the backward's own op
      f.pass = Pass::kBackwardInput;
      out.push(f);
      continue;
    }
    switch (f.kind) {
      case OpKind::kGemm: {
        const bool has_weights = f.has_weights;
        Op dgrad = f;
        dgrad.pass = Pass::kBackwardInput;
        dgrad.n = f.k;
        dgrad.k = f.n;
        out.push(dgrad);
        Op second = f;
        if (has_weights) {
          second.pass = Pass::kBackwardWeight;
          second.m = f.k;
          second.n = f.n;
          second.k = f.m;
        } else {  // batched attention GEMMs: both operands are activations
          second.pass = Pass::kBackwardInput;
          second.m = f.k;
          second.n = f.n;
          second.k = f.m;
        }
        out.push(second);
        break;
      }
      case OpKind::kAttention: {
        Op bw = f;
        bw.pass = Pass::kBackwardInput;
        bw.flops = 2.5 * f.flops;  // FlashAttention-2 backward: 5 matmuls vs 2 forward
        bw.bytes = 2.0 * f.bytes;
        out.push(bw);
        break;
      }
      case OpKind::kElementwise: {
        Op bw = f;
        bw.pass = Pass::kBackwardInput;
        bw.bytes = 1.5 * f.bytes;  // reads the saved input and the incoming gradient
        out.push(bw);
        break;
      }
      case OpKind::kCollective: {
        Op bw = f;
        bw.pass = Pass::kBackwardInput;
        if (f.dim == CommDim::kTP) {
          // Conjugates: all-gather <-> reduce-scatter; the all-reduce moves to where forward had
          // the identity, so count it the same number of times.
          if (f.collective == CollectiveOp::kAllGather) {
            // Megatron-LM runs this input-gradient reduce-scatter asynchronously beside the
            // weight-gradient GEMM (LinearWithGradAccumulationAndAsyncCommunication.backward);
            // charging it overlapped moves the dev set's MAPE from 6.38% to 6.45% with today's
            // fitted profiles and a refit does not recover it (docs/performance-model.md §3).
            bw.collective = CollectiveOp::kReduceScatter;
            bw.name = "tp_reducescatter_bwd";
            out.push(bw);
            if (sp) {  // re-gather the sequence-sharded input for the weight gradient
              Op ag = f;
              ag.pass = Pass::kBackwardWeight;
              ag.name = "tp_allgather_wgrad";
              ag.overlappable = true;  // Megatron overlaps it with the input-gradient GEMM
              out.push(ag);
            }
          } else if (f.collective == CollectiveOp::kReduceScatter) {
            bw.collective = CollectiveOp::kAllGather;
            bw.name = "tp_allgather_bwd";
            out.push(bw);
          } else {
            bw.name = "tp_allreduce_bwd";
            out.push(bw);
          }
        } else if (f.dim == CommDim::kCP) {
          out.push(bw);  // K/V exchange again
          Op rs = f;     // and the dK/dV gradients back (reduce-scatter as ring p2p)
          rs.pass = Pass::kBackwardInput;
          rs.name = "cp_dkv_exchange";
          out.push(rs);
        } else {
          out.push(bw);  // EP dispatch/combine mirror each other
        }
        break;
      }
    }
  }
}

void build_layer(const ModelSpec& m, const Workload& w, const Plan& p, const Placements& g,
                 const HardwareProfile& hw, bool moe, LayerOps& out) {
  Builder b{m, w, p, g, hw, {}};
  const int64_t T = static_cast<int64_t>(p.mbs) * w.seq_len / p.cp;
  const double Tn = p.sp ? static_cast<double>(T) / p.tp : static_cast<double>(T);
  attention_block(b, T, Tn);
  mlp_block(b, T, Tn, moe);
  emit_with_backward(b.fwd, p.sp, out);
}

}  // namespace

void build_op_program(const ModelSpec& m, const Workload& w, const Plan& p, const Cluster& c,
                      OpProgram& out) {
  out.dense_layer.clear();
  out.moe_layer.clear();
  out.embedding.clear();
  out.head.clear();
  out.mtp.clear();
  out.groups = place_groups(p, c.profile, c.num_gpus);
  build_layer(m, w, p, out.groups, c.profile, false, out.dense_layer);
  if (m.moe) build_layer(m, w, p, out.groups, c.profile, true, out.moe_layer);

  const int64_t T = static_cast<int64_t>(p.mbs) * w.seq_len / p.cp;
  const double Tn = p.sp ? static_cast<double>(T) / p.tp : static_cast<double>(T);
  const double h = static_cast<double>(m.hidden), ab = 2.0;
  out.tokens_per_microbatch = T;
  // Megatron's scatter-gather optimization (Narayanan et al. 2021 §4.1): each TP rank sends
  // 1/t of the boundary activation and the receiver all-gathers it over NVLink; with SP the
  // activation is sequence-sharded anyway.
  out.pp_message_bytes = static_cast<double>(T) * h * ab / p.tp;

  // Embedding (first stage): lookup (+ learned positions) and dropout; backward scatters
  // gradients into the table.
  {
    Op o;
    o.kind = OpKind::kElementwise;
    o.name = "embedding_lookup";
    o.bytes = Tn * h * (ab + (m.hidden_dropout > 0 ? 1.0 : 0.0)) +
              (m.position_embedding == PositionEmbedding::kLearned ? Tn * h * 2 * ab : 0);
    o.kernels = 3;
    out.embedding.push(o);
    o.pass = Pass::kBackwardWeight;
    o.name = "embedding_grad";
    o.bytes = Tn * h * 3 * ab;
    out.embedding.push(o);
  }
  // Head (last stage): final norm, logits GEMM over the vocab shard, vocab-parallel cross
  // entropy (fp32 logits: several passes over T x V/t), its small TP all-reduces.
  {
    const int64_t v_local = m.vocab / p.tp;
    Builder b{m, w, p, out.groups, c.profile, {}};
    b.elementwise("final_norm", Tn * h * 2 * ab);
    tp_enter(b, static_cast<double>(T) * h * ab);
    b.gemm("logits", T, v_local, m.hidden, 1, true, false, false, Fp8Tensor::kInput, true);
    b.elementwise("cross_entropy", static_cast<double>(T) * v_local * (ab + 4 + 4 + 4), false, 8);
    b.collective("tp_loss_allreduce", CollectiveOp::kAllReduce, CommDim::kTP, out.groups.tp,
                 static_cast<double>(T) * 4 * 3);
    LayerOps tmp;
    emit_with_backward(b.fwd, p.sp, tmp);
    for (const Op& o : tmp) out.head.push(o);
  }
  // Multi-token prediction (Megatron-Core multi_token_prediction.py @d98e8a6): the next
  // tokens' embedding, the hidden and embedding norms, the concatenation projected by eh_proj
  // (column-parallel, gather_output=False, its 2h input all-gathered under SP) and its output
  // all-gathered over TP before the module's transformer layer (priced as one more layer of
  // the loss rank, stage_layout.h) and its pass through the output layer (the head again).
  if (m.mtp_layers > 0) {
    Builder b{m, w, p, out.groups, c.profile, {}};
    b.elementwise("mtp_embedding_lookup", Tn * h * ab);
    b.elementwise("mtp_norms", 2 * Tn * h * 2 * ab);
    tp_enter(b, static_cast<double>(T) * 2 * h * ab);
    b.gemm("mtp_eh_proj", T, m.hidden / p.tp, 2 * m.hidden);
    if (p.tp > 1)
      b.collective("mtp_tp_allgather", CollectiveOp::kAllGather, CommDim::kTP, out.groups.tp,
                   static_cast<double>(T) * h * ab);
    LayerOps tmp;
    emit_with_backward(b.fwd, p.sp, tmp);
    for (const Op& o : tmp) out.mtp.push(o);
  }
}

}  // namespace dtplan
