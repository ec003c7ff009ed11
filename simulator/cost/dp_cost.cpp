#include "simulator/cost/dp_cost.h"

#include <algorithm>

#include "simulator/cost/layer_cost.h"
#include "simulator/workload/op_program.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {

double default_bucket_params(int dp_size) { return std::max(40e6, 1e6 * dp_size); }

double zero3_forward_gathers(const Plan& p) {
  return p.recompute == Recompute::kFull && p.zero3_gather_per_tensor ? 2.0 : 1.0;
}

DpStage dp_stage(const ModelSpec& m, const ParamCounts& counts, const Plan& p, int rank,
                 const RankLayers& layers, const Placements& groups, double grad_bytes,
                 const CollectivePrice& price) {
  DpStage ds;
  ds.prm = params_on_rank(m, counts, p, rank, layers);
  auto reduce = [&](double params, const GroupPlacement& g) {
    if (g.size <= 1 || params <= 0 || p.zero == 3) return;
    const double n = g.size;
    if (p.zero == 0) {
      ds.reduce_s += price(CollectiveOp::kAllReduce, params * grad_bytes, g);
      ds.reduce_bytes += params * grad_bytes * 2 * (n - 1) / n;
    } else {
      ds.reduce_s += price(CollectiveOp::kReduceScatter, params * grad_bytes, g);
      ds.reduce_bytes += params * grad_bytes * (n - 1) / n;
      ds.gather_s += price(CollectiveOp::kAllGather, params * 2.0, g);
      ds.gather_bytes += params * 2.0 * (n - 1) / n;
    }
  };
  reduce(ds.prm.dense, groups.dp);
  reduce(ds.prm.expert, groups.edp);
  if (ds.prm.total() > 0)
    ds.bucket_share = std::min(1.0, default_bucket_params(groups.dp.size) / ds.prm.total());
  if (p.zero == 3) {
    // One collective per layer (FSDP's flat or foreach buffers, Megatron-FSDP's buckets), or
    // one per parameter tensor (DeepSpeed stage 3 of 2021), for each group the layer's
    // parameters are sharded over: dense ones over the data-parallel group, experts over the
    // expert-data-parallel group (its own placement: with EP filling a node, one rank per node
    // on that node's share of the NICs), one after the other on the communication stream.
    const int tensors = p.zero3_gather_per_tensor ? param_tensors_per_layer(m) : 1;
    const double l = std::max(1, layers.total());
    auto add = [&](double params, const GroupPlacement& g) {
      if (g.size <= 1 || params <= 0) return;
      const double n = g.size, layer_params = params / l;
      auto per_layer = [&](CollectiveOp op, double bytes_per_param) {
        return tensors * price(op, layer_params / tensors * bytes_per_param, g);
      };
      ds.layer_gather_s += per_layer(CollectiveOp::kAllGather, 2.0);
      ds.layer_reduce_s += per_layer(CollectiveOp::kReduceScatter, grad_bytes);
      ds.layer_gather_bytes += layer_params * 2.0 * (n - 1) / n;
      ds.layer_reduce_bytes += layer_params * grad_bytes * (n - 1) / n;
    };
    add(ds.prm.dense, groups.dp);
    add(ds.prm.expert, groups.edp);
  }
  return ds;
}

namespace {

// The reduction that trails the last backward (ZeRO 0-2): bucketed, it runs with that
// backward and its last bucket (`share` of the traffic) always trails it.
double trailing_exposed_s(double t, double bw_s, bool bucketed, double share) {
  return bucketed ? std::max(share * t, t - bw_s) : t;
}

}  // namespace

DpCost dp_step_cost(const DpStage& s, const Plan& p, int layers, int microbatches, double f_s,
                    double bw_s, double window_s, double slack_s) {
  DpCost c;
  const double mb = std::max(1, microbatches);
  if (p.zero == 3) {
    if (s.layer_gather_s <= 0 && s.layer_reduce_s <= 0) return c;
    const double l = std::max(1, layers);
    const double gathers_f = zero3_forward_gathers(p);
    const double t_ag = s.layer_gather_s, t_rs = s.layer_reduce_s;
    const double per_layer_f = f_s / l, per_layer_bw = bw_s / l;
    // Forward gathers (l x gathers_f per micro-batch): each behind the previous layer's
    // forward, except the first, which nothing precedes; backward: the gather and the
    // reduce-scatter of a layer behind its neighbour's backward.
    const double fwd_hidden = std::max(0.0, t_ag - per_layer_f / gathers_f);
    const double exposed_mb =
        (l * gathers_f - 1) * fwd_hidden + t_ag + l * std::max(0.0, t_ag + t_rs - per_layer_bw);
    c.time_s = mb * l * ((gathers_f + 1) * t_ag + t_rs);
    c.bytes = mb * l * ((gathers_f + 1) * s.layer_gather_bytes + s.layer_reduce_bytes);
    // Without prefetching every gather and reduce-scatter waits on the critical path.
    const double waited = std::min(c.time_s, p.zero3_prefetch ? mb * exposed_mb : c.time_s);
    c.exposed_s = std::max(0.0, waited - slack_s);
    c.hidden_s = c.time_s - waited;
  } else {
    // ZeRO-2 reduce-scatters every micro-batch's gradients, each but the last behind the next
    // micro-batch; ZeRO 0-1 reduce once. The last reduction trails the last backward (its
    // window, and the slack before the step's last task, hide part of it when bucketed). The
    // updated parameters' all-gather (ZeRO 1-2) follows the optimizer step: exposed whole, or,
    // with overlap_param_gather, launched bucket by bucket ahead of the next step's first
    // forward, which hides all but the first bucket (bucket_share) where the forward is long
    // enough (Megatron-Core param_and_grad_buffer.py: a forward pre-hook waits for its bucket
    // and launches the next, d98e8a6).
    const double reductions = p.zero == 2 ? mb : 1.0;
    c.time_s = reductions * s.reduce_s + s.gather_s;
    c.bytes = reductions * s.reduce_bytes + s.gather_bytes;
    c.trailing_s = s.reduce_s;
    c.trailing_bytes = s.reduce_bytes;
    c.trailing_exposed_s = std::max(
        0.0,
        trailing_exposed_s(s.reduce_s, window_s, p.overlap_grad_reduce, s.bucket_share) - slack_s);
    c.gather_s = s.gather_s;
    c.gather_bytes = s.gather_bytes;
    c.gather_exposed_s = p.overlap_param_gather
                             ? std::max(s.bucket_share * s.gather_s, s.gather_s - f_s)
                             : s.gather_s;
    const double earlier =
        p.overlap_grad_reduce ? std::max(0.0, s.reduce_s - (f_s + bw_s)) : s.reduce_s;
    c.exposed_s = (reductions - 1) * earlier + c.trailing_exposed_s + c.gather_exposed_s;
    // Hidden: the earlier reductions behind the next micro-batches, the bucketed trailing
    // reduction behind the last backward, the bucketed gather behind the first forward.
    const double trailing_waited =
        trailing_exposed_s(s.reduce_s, window_s, p.overlap_grad_reduce, s.bucket_share);
    c.hidden_s = (reductions - 1) * (s.reduce_s - earlier) +
                 std::max(0.0, s.reduce_s - trailing_waited) +
                 std::max(0.0, s.gather_s - c.gather_exposed_s);
  }
  return c;
}

}  // namespace dtplan
