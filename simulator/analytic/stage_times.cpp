// The per-rank times every estimator entry point computes first (estimator_internal.h).
#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "simulator/analytic/estimator_internal.h"

namespace dtplan {

static_assert(std::is_trivially_destructible_v<LayerCostSet>);

double price_collective(const StageTimes& st, const HardwareProfile& hw, CollectiveOp op,
                        double bytes, const GroupPlacement& g) {
  return st.memo ? st.memo->collective(hw, op, bytes, g) : collective_cost(hw, op, bytes, g).time_s;
}

StageTimes& prepare(void* local, const ModelSpec& m, const Cluster& c, const Workload& w,
                    const Plan& p, EstimatorCache::Impl* ci, bool placement) {
  if (ci) {
    if (ci->model != &m || ci->cluster != &c || ci->seq_len != w.seq_len ||
        ci->precision != w.precision || ci->fp8_recipe != w.fp8_recipe)
      ci->reset(m, c, w);
    StageTimes& st = *ci->stages;
    st.memo = ci;
    const EstimatorCache::Impl::Shape shape{p.tp,
                                            p.pp,
                                            p.cp,
                                            p.dp,
                                            p.ep,
                                            p.etp,
                                            p.vpp,
                                            p.mbs,
                                            p.recompute,
                                            p.sp,
                                            p.flash_attention,
                                            p.tp_comm_overlap,
                                            p.ep_comm_overlap,
                                            p.moe_dispatcher,
                                            layout_key(p)};
    if (!(ci->shape == shape && ci->shape_order == p.rank_order)) {
      ci->shape.reset();  // until the lookups below are done
      ci->shape_costs = &ci->layer_costs_for(m, c, w, p);
      ci->shape_layers = ci->split_for(m, p);
      ci->shape = shape;
      ci->shape_order = p.rank_order;
    }
    st.costs = ci->shape_costs;
    st.layers = ci->shape_layers;
    // groups_for() compares the layout itself: cheap when it is the last one.
    st.groups = placement ? &ci->groups_for(p, c, p.rank_order) : nullptr;
    st.counts = &ci->counts;
    st.pp = std::min(p.pp, kMaxStages);
    st.mb = std::max(1, p.num_microbatches());
    return st;
  }
  StageTimes& st = *new (local) StageTimes;
  st.memo = nullptr;
  st.costs = new (st.costs_storage) LayerCostSet(layer_costs(m, c, w, p));
  if (placement) {
    st.placed = place_groups(p, c.profile, c.num_gpus);
    st.groups = &st.placed;
  } else {
    st.groups = nullptr;
  }
  RankLayers* fresh = reinterpret_cast<RankLayers*>(st.layers_storage);
  for (int i = 0; i < std::min(p.pp, kMaxStages); ++i)
    new (&fresh[i]) RankLayers(layers_on_rank(m, p, i));
  st.layers = fresh;
  st.own_counts = count_params(m);
  st.counts = &st.own_counts;
  st.pp = std::min(p.pp, kMaxStages);
  st.mb = std::max(1, p.num_microbatches());
  return st;
}

// Rank i's communication per micro-batch: every collective counted once with its exposed part
// and bytes (a LayerCost's exposed parts are within its totals, so the sums are too), charged
// into a ledger; pipeline sends at `t_p2p` each.
CommLedger stage_comm(const StageTimes& st, const Plan& p, int i, double t_p2p) {
  const int pp = st.pp;
  const LayerCost& dense = st.costs->dense;
  const LayerCost& moe = st.costs->moe;
  const LayerCost& emb = st.costs->emb;
  const LayerCost& head = st.costs->head;
  const double emb_r = 1, head_r = 1;  // as in the stage loop
  const RankLayers l = st.layers[i];
  const RankLayers rl = recomputed_layers(p, l);
  std::array<double, kCommDims> time{}, exposed{}, bytes{};
  auto add = [&](const LayerCost& lc, double n, double nr) {
    for (int d = 0; d < kCommDims; ++d) {
      time[d] += n * lc.comm_time[d] + nr * lc.comm_time_r[d];
      exposed[d] += n * lc.exposed[d] + nr * lc.exposed_r[d];
      bytes[d] += n * lc.volume[d] + nr * lc.volume_r[d];
    }
  };
  add(dense, l.dense, rl.dense);
  add(moe, l.moe, rl.moe);
  if (i == 0) add(emb, 1, emb_r);
  if (i == loss_rank(p)) {
    // Each multi-token-prediction module passes through the output layer and loss again.
    const int mtp = st.costs->mtp_modules;
    add(head, 1 + mtp, (1 + mtp) * head_r);
    if (mtp > 0) add(st.costs->mtp, mtp, mtp * head_r);
  }
  if (pp > 1) {
    // Each micro-batch sends an activation and a gradient per chunk boundary; the rank
    // waits for the exchanges its schedule blocks on.
    const int d = static_cast<int>(CommDim::kPP);
    time[d] += 2.0 * p.vpp * t_p2p;
    exposed[d] += 2 * pipeline_exchanges_per_pass(i, pp, p.vpp) * t_p2p;
    bytes[d] += 2.0 * p.vpp * st.costs->pp_message_bytes;
  }
  CommLedger comm;
  for (int d = 0; d < kCommDims; ++d) comm.charge(d, time[d], exposed[d], bytes[d]);
  return comm;
}

namespace {

// Each rank's forward, backward and weight-gradient time for one micro-batch (all its chunks,
// with its pipeline sends), and the busiest rank's breakdown.
// With `detail`, also each rank's exposed TP/CP/EP time (for the simulator's trace).
void stage_loop(StageTimes& st, const HardwareProfile& hw, const Plan& p,
                StepCosts* detail = nullptr) {
  const LayerCost& dense = st.costs->dense;
  const LayerCost& moe = st.costs->moe;
  const LayerCost& emb = st.costs->emb;
  const LayerCost& head = st.costs->head;
  const int pp = st.pp;
  // Pipeline point-to-point: one activation (forward) and one gradient (backward) per
  // micro-batch per chunk boundary; blocking in Megatron's schedules, so exposed.
  const double t_p2p = pp > 1 ? price_collective(st, hw, CollectiveOp::kSendRecv,
                                                 st.costs->pp_message_bytes, st.groups->pp)
                              : 0;
  st.t_p2p = t_p2p;
  const RankLayers* stage_layers = st.layers;
  std::array<double, kMaxStages>& f = st.f;
  std::array<double, kMaxStages>& b = st.b;
  std::array<double, kMaxStages>& wg = st.wg;
  // Megatron checkpoints the transformer layers only (megatron/core/transformer/
  // transformer_block.py, _checkpointed_forward), so the embedding and the output layer are
  // not recomputed; charging them as recomputed is what today's fitted profiles were fitted
  // with (without it the dev set's MAPE goes from 6.38% to 7.1%, 6.77% after a refit), so it
  // stays until the missing costs it hides are modelled (docs/performance-model.md §3).
  const double emb_r = 1, head_r = 1;
  const int head_rank = loss_rank(p);  // the output layer and loss (rank 0 in a V)
  int busiest = 0;
  double busiest_t = -1;
  double busiest_compute = 0, busiest_recompute = 0, busiest_overhead = 0;
  st.n_distinct = 0;
  if (detail) detail->exposed_tp_cp_ep.assign(static_cast<size_t>(pp), {});
  for (int i = 0; i < pp; ++i) {
    const RankLayers l = stage_layers[i];
    // Middle stages with the same layers as the previous middle stage take the same time.
    if (i >= 2 && i < pp - 1 && l == stage_layers[static_cast<size_t>(i - 1)]) {
      if (detail)
        detail->exposed_tp_cp_ep[static_cast<size_t>(i)] =
            detail->exposed_tp_cp_ep[static_cast<size_t>(i - 1)];
      f[static_cast<size_t>(i)] = f[static_cast<size_t>(i - 1)];
      b[static_cast<size_t>(i)] = b[static_cast<size_t>(i - 1)];
      wg[static_cast<size_t>(i)] = wg[static_cast<size_t>(i - 1)];
      st.compute[static_cast<size_t>(i)] = st.compute[static_cast<size_t>(i - 1)];
      st.recompute[static_cast<size_t>(i)] = st.recompute[static_cast<size_t>(i - 1)];
      st.overhead[static_cast<size_t>(i)] = st.overhead[static_cast<size_t>(i - 1)];
      continue;
    }
    st.distinct[static_cast<size_t>(st.n_distinct++)] = i;
    f[static_cast<size_t>(i)] = b[static_cast<size_t>(i)] = wg[static_cast<size_t>(i)] = 0;
    // n layers of a kind, nr of them recomputed.
    auto add = [&](const LayerCost& lc, double n, double nr, double& comp, double& rec,
                   double& ovh) {
      f[i] += n * lc.f;
      b[i] += n * lc.b + nr * lc.r;
      wg[i] += n * lc.w;
      ovh += n * lc.overhead;
      comp += n * (lc.compute_f + lc.compute_b + lc.compute_w);
      rec += nr * (p.recompute == Recompute::kFull ? lc.compute_f : lc.compute_r);
    };
    const RankLayers rl = recomputed_layers(p, l);  // --recompute-layers: some layers only
    double comp = 0, rec = 0, ovh = 0;
    add(dense, l.dense, rl.dense, comp, rec, ovh);
    add(moe, l.moe, rl.moe, comp, rec, ovh);
    if (i == 0) add(emb, 1, emb_r, comp, rec, ovh);
    if (i == head_rank) {
      const int mtp = st.costs->mtp_modules;  // each passes through the head again
      add(head, 1 + mtp, (1 + mtp) * head_r, comp, rec, ovh);
      if (mtp > 0) add(st.costs->mtp, mtp, mtp * head_r, comp, rec, ovh);
    }
    // Activation offloading: the offloaded layers' activations go to the host during the
    // forward and come back during the backward over the host link, on a copy stream of their
    // own; what a pass's compute does not cover, the pass waits for (framework overhead).
    // Every GPU of the node copies at once, so GPUs behind one PCIe uplink share it.
    if (p.offload_layers > 0 && p.recompute != Recompute::kFull) {
      const double bytes = offloaded_activation_bytes(p, l, st.costs->activations);
      const double link = hw.host.concurrent_gbps_per_gpu() * 1e9;
      if (bytes > 0 && link > 0) {
        const double t = bytes / link;
        const double wait_f = std::max(0.0, t - f[i]), wait_b = std::max(0.0, t - b[i]);
        f[i] += wait_f;
        b[i] += wait_b;
        ovh += wait_f + wait_b;
      }
    }
    if (pp > 1) {
      const double hops = pipeline_exchanges_per_pass(i, pp, p.vpp);
      f[i] += hops * t_p2p;
      b[i] += hops * t_p2p;
    }
    if (detail) {
      const CommLedger comm = stage_comm(st, p, i, t_p2p);
      detail->exposed_tp_cp_ep[static_cast<size_t>(i)] = {
          comm[static_cast<int>(CommDim::kTP)].exposed_s,
          comm[static_cast<int>(CommDim::kCP)].exposed_s,
          comm[static_cast<int>(CommDim::kEP)].exposed_s};
    }
    st.compute[static_cast<size_t>(i)] = comp;
    st.recompute[static_cast<size_t>(i)] = rec;
    st.overhead[static_cast<size_t>(i)] = ovh;
    const double t = f[i] + b[i] + wg[i];
    if (t > busiest_t) {
      busiest_t = t;
      busiest = i;
      busiest_compute = comp;
      busiest_recompute = rec;
      busiest_overhead = ovh;
    }
  }
  st.busiest = busiest;
  st.busiest_t = busiest_t;
  st.busiest_comm = stage_comm(st, p, busiest, t_p2p);
  st.busiest_compute = busiest_compute;
  st.busiest_recompute = busiest_recompute;
  st.busiest_overhead = busiest_overhead;
}

}  // namespace

void run_stages(StageTimes& st, const HardwareProfile& hw, const Plan& p, StepCosts* detail) {
  if (!st.memo) {
    stage_loop(st, hw, p, detail);
    return;
  }
  // With `detail` the loop runs anyway (the cached times do not include it); its times are
  // the same, so the key stays valid.
  const StageKey key{st.costs,    st.memo->placement_gen, st.pp,           p.vpp, layout_key(p),
                     p.recompute, p.recompute_layers,     p.offload_layers};
  if (st.memo->stage_key == key && !detail) return;
  stage_loop(st, hw, p, detail);
  st.memo->stage_key = key;
}

const IPipelineSchedule* schedule_of(const StageTimes& st, const Plan& p) {
  const IPipelineSchedule* sched = plan_schedule(p);  // a pointer comparison when cached
  if (!sched || st.pp == 1) {
    static const IPipelineSchedule* const one_f_one_b = find_schedule("1f1b");
    sched = one_f_one_b;
  }
  return sched;
}

PipelineTime pipeline_time(StageTimes& st, const IPipelineSchedule* sched, const Plan& p,
                           bool rank_ends) {
  PipelineInput in{st.pp, p.vpp, st.mb, st.f.data(), st.b.data(), st.wg.data(), st.t_p2p};
  in.uneven_split = p.uneven_pp;
  if (!rank_ends) return sched->time(in);
  in.rank_end_s = st.rank_end.data();
  in.rank_grad_start_s = st.rank_grad_start.data();
  constexpr double kUnset = -1;
  st.rank_end[0] = st.rank_grad_start[0] = kUnset;
  const PipelineTime t = sched->time(in);
  if (st.rank_end[0] == kUnset || st.rank_grad_start[0] == kUnset)
    throw std::logic_error("schedule '" + p.schedule +
                           "': time() must fill PipelineInput::rank_end_s and rank_grad_start_s");
  return t;
}

namespace {

// Memory: first, last and the most loaded stage.
void memory_peak(MemoryPeak& out, const StageTimes& st, const ModelSpec& m, const Workload& w,
                 const Plan& p, const IPipelineSchedule* msched) {
  const int pp = st.pp;
  // Middle stages are mostly alike; evaluate the first, stage 1 (most in flight after 0 in
  // most schedules), the last, and the middle ranks that can hold more (below).
  const int ranks[3] = {0, 1, pp - 1};
  const int visited = std::min(pp, 3);  // pp 1: rank 0; pp 2: ranks 0 and 1
  // Their parameters do not depend on ZeRO, recomputation, micro-batch or schedule: kept.
  const ParamsOnRank* params = nullptr;
  if (EstimatorCache::Impl* ci = st.memo) {
    const std::array<int, 6> key{p.tp, p.ep, p.etp, p.pp, p.vpp, layout_key(p)};
    if (ci->edge_params_for != key) {
      for (int k = 0; k < visited; ++k)
        ci->edge_params[static_cast<size_t>(k)] =
            params_on_rank(m, *st.counts, p, ranks[k], st.layers[static_cast<size_t>(ranks[k])]);
      ci->edge_params_for = key;
    }
    params = ci->edge_params.data();
  }
  // Ranks in order: the three above, and every middle rank whose layers differ from the rank
  // before it (an uneven split, or dense layers before the MoE ones, can make it the peak).
  auto visit = [&](int i, const ParamsOnRank* prm) {
    StageMemory s = stage_memory(m, w, p, *msched, i, *st.counts, st.costs->activations,
                                 st.layers[static_cast<size_t>(i)], prm);
    if (i == 0) out.first = s;
    if (i == pp - 1) out.last = s;
    if (s.total_bytes() > out.peak_bytes) {
      out.peak_bytes = s.total_bytes();
      out.peak = s;
      out.peak_stage = i;
    }
  };
  for (int k = 0; k < std::min(visited, 2); ++k) visit(ranks[k], params ? &params[k] : nullptr);
  // A middle rank with the same layers as the one before differs only in the micro-batches
  // it holds in flight: visited when it holds more (V-shaped schedules hold more on later
  // ranks when the micro-batches are few).
  // Only a MoE model (dense layers first, or every k-th layer MoE) or a V-shaped schedule can
  // give a middle rank more than rank 1: with a dense model the middle ranks of any split hold
  // the same layers, and 1F1B-like schedules hold fewer micro-batches on later ranks.
  const bool v_shape = msched->v_shape();
  if (!m.moe && !v_shape) {
    // A two-part split (--stage-split): the second part's first stage holds its most.
    if (p.split_stages > 1 && p.split_stages < pp - 1) visit(p.split_stages, nullptr);
    if (visited == 3) visit(pp - 1, params ? &params[2] : nullptr);
    return;
  }
  const int mb = p.num_microbatches();
  double prev_inflight = v_shape ? msched->inflight_microbatches(1, p.pp, p.vpp, mb) : 0;
  for (int i = 2; i < pp - 1; ++i) {
    const double inflight = v_shape ? msched->inflight_microbatches(i, p.pp, p.vpp, mb) : 0;
    if (!(st.layers[static_cast<size_t>(i)] == st.layers[static_cast<size_t>(i - 1)]) ||
        inflight > prev_inflight)
      visit(i, nullptr);
    prev_inflight = inflight;
  }
  if (visited == 3) visit(pp - 1, params ? &params[2] : nullptr);
}

}  // namespace

const MemoryPeak& memory_of(StageTimes& st, void* local, const ModelSpec& m, const Workload& w,
                            const Plan& p, const IPipelineSchedule* sched) {
  if (!st.memo) {
    MemoryPeak& out = *new (local) MemoryPeak;
    memory_peak(out, st, m, w, p, sched);
    return out;
  }
  // The memory depends on the micro-batch count only through the activations each rank holds
  // in flight (stage_memory): plans of a batch range that hold as many share it.
  const MemoryKey key = memory_key(st.costs, sched, p, -1);
  EstimatorCache::Impl& ci = *st.memo;
  const int mb = p.num_microbatches();
  bool same = ci.memory_for == key;
  if (same && ci.memory_mb != mb) {
    // Another micro-batch count: the same memory if the ranks memory_peak visits (the first,
    // second and last, and a two-part split's first stage of its second part; every rank for
    // MoE models and V schedules) hold as many in flight.
    auto alike = [&](int i) {
      return sched->inflight_microbatches(i, p.pp, p.vpp, mb) ==
             sched->inflight_microbatches(i, p.pp, p.vpp, ci.memory_mb);
    };
    const int pp = st.pp;
    if (!m.moe && !sched->v_shape()) {
      same = alike(0) && alike(std::min(1, pp - 1)) && alike(pp - 1) &&
             (!(p.split_stages > 1 && p.split_stages < pp - 1) || alike(p.split_stages));
    } else {
      for (int i = 0; i < pp && same; ++i) same = alike(i);
    }
  }
  if (!same) {
    ci.memory = MemoryPeak{};
    memory_peak(ci.memory, st, m, w, p, sched);
    ci.memory_for = key;
  }
  ci.memory_mb = mb;  // what the memo holds is also this count's memory
  return ci.memory;
}

static_assert(std::is_trivially_destructible_v<StageTimes>);
static_assert(std::is_trivially_destructible_v<MemoryPeak>);

}  // namespace dtplan
