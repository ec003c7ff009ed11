#include "simulator/analytic/estimator.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/error.h"
#include "core/registry.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/compute_cost.h"
#include "simulator/cost/memory_model.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/workload/op_program.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {

std::vector<std::string> schedule_names() { return Registry<IPipelineSchedule>::global().names(); }

std::vector<Violation> validate_schedule(const Plan& p) {
  std::vector<Violation> v;
  const IPipelineSchedule* s = find_schedule(p.schedule);
  if (!s) {
    auto names = schedule_names();
    v.push_back({"--schedule", fmt::format("unknown schedule '{}'{}; `dtplan list schedules` shows "
                                           "the registered ones",
                                           p.schedule,
                                           did_you_mean(p.schedule, std::span<const std::string>(names)))});
    return v;
  }
  if (p.pp > 1 && !s->accepts_chunks(p.vpp))
    v.push_back({"--vpp", fmt::format("schedule '{}' cannot run vpp = {}: {}", p.schedule, p.vpp,
                                      s->chunks_rule())});
  if (p.pp > 1024) v.push_back({"--pp", "at most 1024 pipeline stages are modelled"});
  return v;
}

namespace {

constexpr int kMaxStages = 1024;

// Costs of one layer kind for one micro-batch, split by pass.
struct LayerCost {
  double f = 0, b = 0, w = 0;   // compute + exposed communication
  double r = 0;                 // recomputation (forward ops re-run before the backward)
  double compute_f = 0, compute_b = 0, compute_w = 0, compute_r = 0;
  std::array<double, kCommDims> exposed{};   // per micro-batch, forward + backward (no recompute)
  std::array<double, kCommDims> exposed_r{};  // communication re-run by recomputation
  std::array<double, kCommDims> volume{};    // bytes sent per rank per micro-batch
  std::array<double, kCommDims> comm_time{};
};

double sent_bytes(const Op& o) {
  const int n = o.group.size;
  switch (o.collective) {
    case CollectiveOp::kAllReduce: return o.bytes * 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll: return o.bytes * (n - 1.0) / n;
    case CollectiveOp::kSendRecv: return o.bytes;
  }
  return o.bytes;
}

template <typename List>
LayerCost cost_ops(const List& ops, const HardwareProfile& hw, const ComputeCostModel& cm,
                   const Plan& p) {
  LayerCost lc;
  const double slowdown = hw.efficiency.comm_compute_slowdown;
  // Pass 1: compute time per pass, and each collective's time (computed once).
  std::array<double, kMaxLayerOps> comm_t{};
  double hidden_f = 0, hidden_b = 0, exposed_f = 0, exposed_b = 0;
  int idx = 0;
  for (const Op& o : ops) {
    const int i = idx++;
    const bool fwd = o.pass == Pass::kForward;
    const bool recomputed = fwd && (p.recompute == Recompute::kFull ||
                                    (p.recompute == Recompute::kSelective && o.selective));
    if (o.kind != OpKind::kCollective) {
      const double t = cm.op_s(o);
      if (fwd) lc.compute_f += t;
      else if (o.pass == Pass::kBackwardInput) lc.compute_b += t;
      else lc.compute_w += t;
      if (recomputed) lc.compute_r += t;
      continue;
    }
    const int d = static_cast<int>(o.dim);
    const double t = collective_cost(hw, o.collective, o.bytes, o.group).time_s;
    comm_t[static_cast<size_t>(i)] = t;
    lc.volume[d] += sent_bytes(o);
    lc.comm_time[d] += t;
    const bool overlapped = o.overlappable || (o.dim == CommDim::kTP && p.tp_comm_overlap);
    if (overlapped) {
      (fwd ? hidden_f : hidden_b) += t;
    } else {
      lc.exposed[d] += t;
      (fwd ? exposed_f : exposed_b) += t;
      // Full recomputation re-runs the forward, collectives included.
      if (fwd && p.recompute == Recompute::kFull) lc.exposed_r[d] += t;
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
    if (o.kind != OpKind::kCollective) continue;
    const bool overlapped = o.overlappable || (o.dim == CommDim::kTP && p.tp_comm_overlap);
    if (!overlapped) continue;
    const bool fwd = o.pass == Pass::kForward;
    const double total = fwd ? hidden_f : hidden_b;
    const double extra = fwd ? extra_f : extra_b;
    if (total > 0) lc.exposed[static_cast<int>(o.dim)] += extra * comm_t[static_cast<size_t>(i)] / total;
  }
  const double slow_f = slowdown * std::min(hidden_f, lc.compute_f);
  const double slow_b = slowdown * std::min(hidden_b, bwd_compute);
  lc.f = lc.compute_f + slow_f + extra_f + exposed_f;
  lc.b = lc.compute_b + slow_b + extra_b + exposed_b;
  lc.w = lc.compute_w;
  lc.r = p.recompute == Recompute::kFull ? lc.compute_f + slow_f + extra_f + exposed_f : lc.compute_r;
  return lc;
}

}  // namespace

Estimate estimate(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                  const EstimatorOptions& opt) {
  const HardwareProfile& hw = c.profile;
  Estimate e;
  OpProgram prog;
  build_op_program(m, w, p, c, prog);
  ComputeCostModel cm{&hw, w.precision};

  const LayerCost dense = cost_ops(prog.dense_layer, hw, cm, p);
  const LayerCost moe = m.moe ? cost_ops(prog.moe_layer, hw, cm, p) : LayerCost{};
  const LayerCost emb = cost_ops(prog.embedding, hw, cm, p);
  const LayerCost head = cost_ops(prog.head, hw, cm, p);

  const int pp = std::min(p.pp, kMaxStages);
  const int mb = std::max(1, p.num_microbatches());
  e.microbatches = mb;
  // Pipeline point-to-point: one activation (forward) and one gradient (backward) per
  // micro-batch per chunk boundary; blocking in Megatron's schedules, so exposed.
  const double t_p2p =
      pp > 1 ? collective_cost(hw, CollectiveOp::kSendRecv, prog.pp_message_bytes, prog.groups.pp).time_s : 0;

  std::array<double, kMaxStages> f{}, b{}, wg{};
  int busiest = 0;
  double busiest_t = -1;
  std::array<double, kCommDims> busiest_exposed{};
  double busiest_compute = 0, busiest_recompute = 0;
  for (int i = 0; i < pp; ++i) {
    const RankLayers l = layers_on_rank(m, p, i);
    auto add = [&](const LayerCost& lc, double n, std::array<double, kCommDims>& exp, double& comp,
                   double& rec) {
      f[i] += n * lc.f;
      b[i] += n * (lc.b + lc.r);
      wg[i] += n * lc.w;
      comp += n * (lc.compute_f + lc.compute_b + lc.compute_w);
      rec += n * (p.recompute == Recompute::kFull ? lc.compute_f : lc.compute_r);
      for (int d = 0; d < kCommDims; ++d) exp[d] += n * (lc.exposed[d] + lc.exposed_r[d]);
    };
    std::array<double, kCommDims> exp{};
    double comp = 0, rec = 0;
    add(dense, l.dense, exp, comp, rec);
    add(moe, l.moe, exp, comp, rec);
    if (i == 0) add(emb, 1, exp, comp, rec);
    if (i == pp - 1) add(head, 1, exp, comp, rec);
    if (pp > 1) {
      const double hops = p.vpp;  // one boundary per chunk
      f[i] += hops * t_p2p;
      b[i] += hops * t_p2p;
      exp[static_cast<int>(CommDim::kPP)] += 2 * hops * t_p2p;
    }
    const double t = f[i] + b[i] + wg[i];
    if (t > busiest_t) {
      busiest_t = t;
      busiest = i;
      busiest_exposed = exp;
      busiest_compute = comp;
      busiest_recompute = rec;
    }
  }

  const IPipelineSchedule* sched = find_schedule(p.schedule);
  if (!sched || pp == 1) sched = find_schedule("1f1b");
  PipelineInput in{pp, p.vpp, mb, f.data(), b.data(), wg.data()};
  const PipelineTime pipe = sched ? sched->time(in) : PipelineTime{mb * busiest_t, 0};

  // Data-parallel gradient reduction and parameter gather, per rank, after the last backward.
  const double grad_bytes = w.precision == Precision::kFp16 ? 2.0 : 4.0;  // fp32 main grads with bf16
  double exposed_dp = 0, dp_time_total = 0, dp_volume = 0;
  for (int i = 0; i < pp; ++i) {
    const ParamsOnRank prm = params_on_rank(m, p, i);
    double t_dp = 0, vol = 0;
    auto reduce = [&](double params, const GroupPlacement& g) {
      if (g.size <= 1 || params <= 0) return;
      const double n = g.size;
      if (p.zero == 0) {
        t_dp += collective_cost(hw, CollectiveOp::kAllReduce, params * grad_bytes, g).time_s;
        vol += params * grad_bytes * 2 * (n - 1) / n;
      } else {
        t_dp += collective_cost(hw, CollectiveOp::kReduceScatter, params * grad_bytes, g).time_s;
        vol += params * grad_bytes * (n - 1) / n;
        if (p.zero <= 2) {
          t_dp += collective_cost(hw, CollectiveOp::kAllGather, params * 2.0, g).time_s;
          vol += params * 2.0 * (n - 1) / n;
        }
      }
    };
    reduce(prm.dense, prog.groups.dp);
    reduce(prm.expert, prog.groups.edp);
    // ZeRO-3: parameters are gathered for every micro-batch's forward and backward; the
    // gathers prefetch behind the previous layer's compute, the first one is exposed.
    double z3_exposed = 0;
    if (p.zero == 3 && prog.groups.dp.size > 1) {
      const GroupPlacement& g = prog.groups.dp;
      const double n = g.size;
      const RankLayers l = layers_on_rank(m, p, i);
      const double layer_params = l.total() > 0 ? prm.total() / l.total() : 0;
      const double t_ag = collective_cost(hw, CollectiveOp::kAllGather, layer_params * 2.0, g).time_s;
      const double per_layer_f = l.total() > 0 ? f[i] / l.total() : 0;
      const double per_layer_b = l.total() > 0 ? (b[i] + wg[i]) / l.total() : 0;
      z3_exposed = mb * (l.total() * (std::max(0.0, t_ag - per_layer_f) + std::max(0.0, t_ag - per_layer_b)) + 2 * t_ag);
      vol += mb * 2 * l.total() * layer_params * 2.0 * (n - 1) / n;
      t_dp += mb * 2 * l.total() * t_ag;
    }
    // Overlap with the backward: the reduction of a stage starts as its last backward
    // produces gradients (bucketed); stage i finishes i backward slots before stage 0.
    const double slack = i * (b[i] + wg[i]);
    double exposed_i;
    if (p.zero == 3) {
      // The per-step gradient reduce-scatter is the only part not prefetched per layer.
      const double t_rs = collective_cost(hw, CollectiveOp::kReduceScatter,
                                          prm.total() * grad_bytes, prog.groups.dp).time_s;
      exposed_i = z3_exposed +
                  (p.overlap_grad_reduce ? std::max(0.1 * t_rs, t_rs - (b[i] + wg[i])) : t_rs);
    } else if (p.overlap_grad_reduce) {
      // Bucketed: the last bucket (about a tenth of the traffic) always trails the backward.
      exposed_i = std::max(0.1 * t_dp, t_dp - (b[i] + wg[i]));
    } else {
      exposed_i = t_dp;
    }
    exposed_i = std::max(0.0, exposed_i - slack);
    exposed_dp = std::max(exposed_dp, exposed_i);
    dp_time_total = std::max(dp_time_total, t_dp);
    if (i == busiest) dp_volume = vol;
  }
  // Tied embeddings across pipeline stages: the first and last stage all-reduce the
  // embedding gradient every step (Megatron _allreduce_embedding_grads).
  if (pp > 1 && m.tied_embeddings) {
    GroupPlacement g;
    g.size = 2;
    g.ranks_per_node = 1;
    g.nodes = 2;
    g.node_gpus_busy = 1;
    const double bytes = static_cast<double>(m.vocab) * m.hidden / p.tp * grad_bytes;
    const double t = collective_cost(hw, CollectiveOp::kAllReduce, bytes, g).time_s;
    exposed_dp += t;
    dp_volume += bytes;
  }

  // Optimizer: Adam is memory-bound: read fp32 grad (4), read+write master, m, v (24), write
  // 16-bit weights (2), plus the gradient-norm pass (4) = 34 bytes per local parameter.
  const ParamsOnRank prm0 = params_on_rank(m, p, busiest);
  const double opt_params = p.zero >= 1 ? prm0.dense / std::max(1, p.dp * p.cp) + prm0.expert / std::max(1, p.edp())
                                        : prm0.total();
  e.optimizer_s = cm.memory_s(opt_params * 34.0) + 20 * hw.efficiency.kernel_overhead_us * 1e-6;

  // Breakdown of the busiest rank's time.
  const double busy = mb * busiest_t;
  e.bubble_s = std::max(0.0, pipe.total_s - busy);
  for (int d = 0; d < kCommDims; ++d) e.exposed_comm_s[d] = mb * busiest_exposed[d];
  e.exposed_comm_s[static_cast<int>(CommDim::kDP)] += exposed_dp;
  e.recompute_s = mb * busiest_recompute;
  e.compute_s = mb * busiest_compute;
  // Whatever of the busiest rank's time is neither compute nor exposed comm is the SM-contention
  // slowdown of overlapped communication; count it as compute.
  double accounted = e.compute_s + e.recompute_s;
  for (int d = 0; d < kCommDims; ++d)
    if (d != static_cast<int>(CommDim::kDP)) accounted += e.exposed_comm_s[d];
  e.compute_s += std::max(0.0, busy - accounted);
  e.step_time_s = pipe.total_s + exposed_dp + e.optimizer_s;

  // Volumes and total communication time per GPU per step (busiest rank).
  {
    const RankLayers l = layers_on_rank(m, p, busiest);
    for (int d = 0; d < kCommDims; ++d) {
      e.comm_volume_bytes[d] = mb * (l.dense * dense.volume[d] + l.moe * moe.volume[d]);
      e.comm_time_s[d] = mb * (l.dense * dense.comm_time[d] + l.moe * moe.comm_time[d]);
      if (p.recompute == Recompute::kFull && d != static_cast<int>(CommDim::kDP)) {
        e.comm_volume_bytes[d] *= 1.0;  // recompute repeats forward comm; counted in time only
      }
    }
    if (pp > 1) {
      e.comm_volume_bytes[static_cast<int>(CommDim::kPP)] = mb * 2.0 * p.vpp * prog.pp_message_bytes;
      e.comm_time_s[static_cast<int>(CommDim::kPP)] = mb * 2.0 * p.vpp * t_p2p;
    }
    e.comm_volume_bytes[static_cast<int>(CommDim::kDP)] = dp_volume;
    e.comm_time_s[static_cast<int>(CommDim::kDP)] = dp_time_total;
  }

  // Throughput and FLOP utilization.
  const StepFlops fl = step_flops(m, w, p, opt.flops);
  const double n = c.num_gpus;
  const double peak = hw.gpu.peak_flops(w.precision);
  const double tokens = static_cast<double>(w.global_batch) * w.seq_len;
  e.model_flops = fl.model;
  e.hardware_flops = fl.model + fl.recompute;
  e.mfu = fl.model / (e.step_time_s * n * peak);
  e.hfu = e.hardware_flops / (e.step_time_s * n * peak);
  e.model_tflops_per_gpu = fl.model / (e.step_time_s * n) / 1e12;
  e.tokens_per_s = tokens / e.step_time_s;
  e.tokens_per_s_per_gpu = e.tokens_per_s / n;
  if (w.train_tokens > 0) e.time_to_train_days = w.train_tokens / e.tokens_per_s / units::kSecondsPerDay;
  e.bubble_fraction = e.bubble_s / e.step_time_s;
  e.comm_share = e.exposed_comm_total_s() / e.step_time_s;

  // Memory: first, last and the most loaded stage.
  const IPipelineSchedule* msched = sched;
  e.memory_capacity_bytes = hw.gpu.memory_gib * units::kGiB;
  double peak_bytes = -1;
  for (int i = 0; i < pp; ++i) {
    // Middle stages are alike; evaluate the first, the last, and stage 1 (most in flight after 0).
    if (i > 1 && i < pp - 1) continue;
    StageMemory s = stage_memory(m, w, p, *msched, i);
    if (i == 0) e.memory_first = s;
    if (i == pp - 1) e.memory_last = s;
    if (s.total_bytes() > peak_bytes) {
      peak_bytes = s.total_bytes();
      e.memory_peak = s;
      e.peak_stage = i;
    }
  }
  e.fits = peak_bytes <= e.memory_capacity_bytes;
  return e;
}

std::vector<StageMemory> all_stage_memory(const ModelSpec& m, const Workload& w, const Plan& p) {
  const IPipelineSchedule* s = find_schedule(p.pp > 1 ? p.schedule : "1f1b");
  if (!s) s = find_schedule("1f1b");
  std::vector<StageMemory> out;
  for (int i = 0; i < p.pp; ++i) out.push_back(stage_memory(m, w, p, *s, i));
  return out;
}

}  // namespace dtplan
