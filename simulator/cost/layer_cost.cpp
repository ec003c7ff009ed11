#include "simulator/cost/layer_cost.h"

#include <algorithm>

#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/workload/op_program.h"

namespace dtplan {

// Parameter tensors of one layer as frameworks hold them (Megatron module layout): fused QKV
// and output projections (MLA: four), two MLP matrices (the SwiGLU gate and up are fused), their
// biases, and the two norms (weight, plus bias for LayerNorm).
int param_tensors_per_layer(const ModelSpec& m) {
  const int linears = (m.mla ? 4 : 2) + 2;
  const int norms = 2 * (m.norm == NormKind::kLayerNorm ? 2 : 1);
  return linears * (m.linear_bias ? 2 : 1) + norms;
}

double sent_bytes(const Op& o) {
  const int n = o.group.size;
  switch (o.collective) {
    case CollectiveOp::kAllReduce:
      return o.bytes * 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
      return o.bytes * (n - 1.0) / n;
    case CollectiveOp::kSendRecv:
    case CollectiveOp::kBroadcast:
      return o.bytes;
  }
  return o.bytes;
}

namespace {

// Prices a layer's ops: compute and host-dispatch time per pass, each collective once, and the
// exposed part of overlapped communication (what the same pass's compute cannot hide).
template <typename List>
LayerCost cost_ops(const List& ops, const HardwareProfile& hw, const ComputeCostModel& cm,
                   const Plan& p) {
  LayerCost lc;
  const double slowdown = hw.efficiency.comm_compute_slowdown;
  // Pass 1: GPU compute and host dispatch time per pass; each collective's time, once.
  std::array<double, kMaxLayerOps> comm_t;  // written before read, for collectives only
  double hidden_f = 0, hidden_b = 0, exposed_f = 0, exposed_b = 0;
  double host_f = 0, host_b = 0, host_w = 0, host_r = 0, exposed_rr = 0;
  // The attention core's compute per pass (what context-parallel exchanges hide behind), the
  // context-parallel exchanges per pass and the ring steps they run in.
  double attn_f = 0, attn_b = 0, cp_f = 0, cp_b = 0;
  int cp_steps = 0;
  std::array<double, kCommDims> exposed_fwd{};
  int idx = 0;
  for (const Op& o : ops) {
    const int i = idx++;
    const bool fwd = o.pass == Pass::kForward;
    const bool recomputed = fwd && (p.recompute == Recompute::kFull ||
                                    (p.recompute == Recompute::kSelective && o.selective));
    const double host = cm.host_s(o);
    if (fwd)
      host_f += host;
    else if (o.pass == Pass::kBackwardInput)
      host_b += host;
    else
      host_w += host;
    if (recomputed) host_r += host;
    if (o.kind != OpKind::kCollective) {
      const double t = cm.op_s(o);
      if (fwd)
        lc.compute_f += t;
      else if (o.pass == Pass::kBackwardInput)
        lc.compute_b += t;
      else
        lc.compute_w += t;
      if (recomputed) lc.compute_r += t;
      if (o.selective) (fwd ? attn_f : attn_b) += t;
      continue;
    }
    const int d = static_cast<int>(o.dim);
    // A layer repeats the same collective (TP all-reduces forward and backward): price each
    // distinct one once.
    double t = -1;
    for (int k = 0; k < i && t < 0; ++k) {
      const Op& q = ops[k];
      if (q.kind == OpKind::kCollective && q.collective == o.collective && q.bytes == o.bytes &&
          q.group.size == o.group.size && q.group.nodes == o.group.nodes &&
          q.group.ranks_per_node == o.group.ranks_per_node)
        t = comm_t[static_cast<size_t>(k)];
    }
    if (t < 0) t = collective_cost(hw, o.collective, o.bytes, o.group).time_s;
    comm_t[static_cast<size_t>(i)] = t;
    const double sent = sent_bytes(o);
    lc.volume[d] += sent;
    lc.comm_time[d] += t;
    if (recomputed) {  // full recomputation re-runs the forward, collectives included
      lc.volume_r[d] += sent;
      lc.comm_time_r[d] += t;
    }
    if (o.dim == CommDim::kCP && o.overlappable) {
      (fwd ? cp_f : cp_b) += t;
      cp_steps = o.group.size - 1;
      continue;
    }
    const bool overlapped = o.overlappable || (o.dim == CommDim::kTP && p.tp_comm_overlap);
    if (overlapped) {
      (fwd ? hidden_f : hidden_b) += t;
    } else {
      lc.exposed[d] += t;
      (fwd ? exposed_f : exposed_b) += t;
      if (fwd) exposed_fwd[d] += t;
      if (recomputed) exposed_rr += t;
    }
  }
  // Overlapped communication hides behind the same pass's compute, slowing it by the SM
  // contention factor; what does not fit is exposed, attributed to the dims that carried it.
  const double bwd_compute = lc.compute_b + lc.compute_w;
  const double extra_f = std::max(0.0, hidden_f - lc.compute_f);
  const double extra_b = std::max(0.0, hidden_b - bwd_compute);
  idx = 0;
  for (const Op& o : ops) {
    const int i = idx++;
    if (o.kind != OpKind::kCollective || (o.dim == CommDim::kCP && o.overlappable)) continue;
    const bool overlapped = o.overlappable || (o.dim == CommDim::kTP && p.tp_comm_overlap);
    if (!overlapped) continue;
    const bool fwd = o.pass == Pass::kForward;
    const double total = fwd ? hidden_f : hidden_b;
    const double extra = fwd ? extra_f : extra_b;
    if (total > 0) {
      const double x = extra * comm_t[static_cast<size_t>(i)] / total;
      lc.exposed[static_cast<int>(o.dim)] += x;
      if (fwd) exposed_fwd[static_cast<int>(o.dim)] += x;
    }
  }
  // Context parallelism (ring attention, Liu et al. 2023; Megatron-Core / Transformer Engine):
  // the attention of a micro-batch runs in cp steps, one per K/V chunk, and the cp - 1 ring
  // transfers each hide behind one step's attention compute, the next chunk arriving while the
  // current one is processed. A step whose transfer takes longer than its compute exposes the
  // difference; the backward sends K/V again and the dK/dV gradients back behind the backward
  // attention steps.
  double cp_extra_f = 0, cp_extra_b = 0, cp_hidden_f = 0, cp_hidden_b = 0;
  if (cp_steps > 0) {
    const double chunks = cp_steps + 1.0;
    cp_extra_f = cp_steps * std::max(0.0, cp_f / cp_steps - attn_f / chunks);
    cp_extra_b = cp_steps * std::max(0.0, cp_b / cp_steps - attn_b / chunks);
    cp_hidden_f = cp_f - cp_extra_f;
    cp_hidden_b = cp_b - cp_extra_b;
    const int dcp = static_cast<int>(CommDim::kCP);
    lc.exposed[dcp] += cp_extra_f + cp_extra_b;
    exposed_fwd[dcp] += cp_extra_f;
  }
  const double slow_f = slowdown * (std::min(hidden_f, lc.compute_f) + cp_hidden_f);
  const double slow_b = slowdown * (std::min(hidden_b, bwd_compute) + cp_hidden_b);
  // GPU time per pass, then the host floor: a pass cannot finish before the host has launched
  // all of its kernels. The excess is framework overhead.
  const double gpu_f = lc.compute_f + slow_f + extra_f + exposed_f + cp_extra_f;
  const double gpu_b = lc.compute_b + slow_b + extra_b + exposed_b + cp_extra_b;
  const double gpu_w = lc.compute_w;
  const double gpu_r = p.recompute == Recompute::kFull ? gpu_f : lc.compute_r + exposed_rr;
  // What recomputation exposes again: the whole forward's exposed communication under full
  // recomputation; selective recomputation re-runs no collective.
  if (p.recompute == Recompute::kFull) lc.exposed_r = exposed_fwd;
  lc.f = std::max(gpu_f, host_f);
  lc.b = std::max(gpu_b, host_b);
  lc.w = std::max(gpu_w, host_w);
  lc.r = p.recompute == Recompute::kNone ? 0.0 : std::max(gpu_r, host_r);
  lc.overhead = (lc.f - gpu_f) + (lc.b - gpu_b) + (lc.w - gpu_w) +
                (p.recompute == Recompute::kNone ? 0.0 : lc.r - gpu_r);
  return lc;
}

}  // namespace

std::vector<OpCostRow> op_cost_rows(const ModelSpec& m, const Cluster& c, const Workload& w,
                                    const Plan& p) {
  const HardwareProfile& hw = c.profile;
  OpProgram prog;
  build_op_program(m, w, p, c, prog);
  ComputeCostModel cm{&hw, w.precision, w.fp8_recipe};
  std::vector<OpCostRow> rows;
  auto add = [&](const char* layer, const auto& ops) {
    for (const Op& o : ops) {
      OpCostRow r;
      r.layer = layer;
      r.op = o;
      r.host_s = cm.host_s(o);
      r.recomputed =
          o.pass == Pass::kForward && (p.recompute == Recompute::kFull ||
                                       (p.recompute == Recompute::kSelective && o.selective));
      if (o.kind == OpKind::kCollective) {
        const CollectiveCost cc = collective_cost(hw, o.collective, o.bytes, o.group);
        r.time_s = cc.time_s;
        r.algorithm = cc.algorithm;
      } else {
        r.time_s = cm.op_s(o);
      }
      if (o.kind == OpKind::kGemm) {
        r.flops = o.gemm_flops();
        const Precision prec =
            o.high_precision && w.precision == Precision::kFp8 ? Precision::kBf16 : w.precision;
        double peak = hw.gpu.peak_flops(prec);
        if (peak <= 0) peak = hw.gpu.peak_flops(Precision::kBf16);
        r.efficiency = r.time_s > 0 ? r.flops / (peak * r.time_s) : 0;
      } else if (o.kind == OpKind::kAttention) {
        r.flops = o.flops;
        const double peak =
            hw.gpu.peak_flops(w.precision == Precision::kFp8 ? Precision::kBf16 : w.precision);
        r.efficiency = r.time_s > 0 ? r.flops / (peak * r.time_s) : 0;
      }
      rows.push_back(r);
    }
  };
  add("embedding", prog.embedding);
  add("dense", prog.dense_layer);
  if (m.moe) add("moe", prog.moe_layer);
  add("head", prog.head);
  if (m.mtp_layers > 0) add("mtp", prog.mtp);
  return rows;
}

LayerCostSet layer_costs(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p) {
  const HardwareProfile& hw = c.profile;
  OpProgram prog;
  build_op_program(m, w, p, c, prog);
  ComputeCostModel cm{&hw, w.precision, w.fp8_recipe};
  LayerCostSet s;
  s.dense = cost_ops(prog.dense_layer, hw, cm, p);
  if (m.moe) s.moe = cost_ops(prog.moe_layer, hw, cm, p);
  s.emb = cost_ops(prog.embedding, hw, cm, p);
  s.head = cost_ops(prog.head, hw, cm, p);
  if (m.mtp_layers > 0) s.mtp = cost_ops(prog.mtp, hw, cm, p);
  s.mtp_modules = m.mtp_layers;
  s.pp_message_bytes = prog.pp_message_bytes;
  s.activations = activation_inputs(m, w, p);
  return s;
}

}  // namespace dtplan
