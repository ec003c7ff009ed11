#include "simulator/analytic/estimator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

#include "core/error.h"
#include "core/registry.h"
#include "simulator/analytic/estimator_internal.h"
#include "simulator/cost/optimizer_cost.h"
#include "simulator/step/step_terms.h"

namespace dtplan {

std::vector<std::string> schedule_names() { return Registry<IPipelineSchedule>::global().names(); }

std::vector<Violation> validate_schedule(const Plan& p) {
  std::vector<Violation> v;
  const IPipelineSchedule* s = find_schedule(p.schedule);
  if (!s) {
    auto names = schedule_names();
    v.push_back(
        {"--schedule",
         fmt::format("unknown schedule '{}'{}; `dtplan list schedules` shows "
                     "the registered ones",
                     p.schedule, did_you_mean(p.schedule, std::span<const std::string>(names)))});
    return v;
  }
  if (p.pp > 1 && !s->accepts_chunks(p.vpp))
    v.push_back({"--vpp", fmt::format("schedule '{}' cannot run vpp = {}: {}", p.schedule, p.vpp,
                                      s->chunks_rule())});
  if (p.pp > 1 && p.gbs > 0 && !s->accepts_microbatches(p.pp, p.vpp, p.num_microbatches()))
    v.push_back(
        {"--mbs", fmt::format("schedule '{}' with pp = {} cannot run {} micro-batches: {}",
                              p.schedule, p.pp, p.num_microbatches(), s->microbatches_rule())});
  if (p.pp > 1024) v.push_back({"--pp", "at most 1024 pipeline stages are modelled"});
  return v;
}

namespace {

double price_through(void* ctx, CollectiveOp op, double bytes, const GroupPlacement& g);

// Prices collectives for the data-parallel costs: through the estimator's cache, and, since
// middle pipeline stages hold the same parameters, remembering the last few prices.
struct DpPricer {
  const StageTimes* st;
  const HardwareProfile* hw;
  struct Memo {
    CollectiveOp op;
    double bytes;
    const GroupPlacement* group;
    double t;
  };
  std::array<Memo, 8> memo;  // only [0, size) is read
  int next = 0, size = 0;
  double operator()(CollectiveOp op, double bytes, const GroupPlacement& g) {
    for (int k = 0; k < size; ++k)
      if (memo[k].op == op && memo[k].bytes == bytes && memo[k].group == &g) return memo[k].t;
    const double t = price_collective(*st, *hw, op, bytes, g);
    memo[static_cast<size_t>(next)] = {op, bytes, &g, t};
    next = (next + 1) % 8;
    size = std::min(size + 1, 8);
    return t;
  }
  CollectivePrice price() { return {&price_through, this}; }
};

double price_through(void* ctx, CollectiveOp op, double bytes, const GroupPlacement& g) {
  return (*static_cast<DpPricer*>(ctx))(op, bytes, g);
}

// One rank's DpStage: from the cache when it holds the layout's, else computed into `own`
// (and kept in the cache).
const DpStage& dp_stage_of(StageTimes& st, const ModelSpec& m, const Plan& p, int rank,
                           double grad_bytes, DpPricer& pricer, DpStage& own) {
  auto compute = [&] {
    return dp_stage(m, *st.counts, p, rank, st.layers[static_cast<size_t>(rank)], *st.groups,
                    grad_bytes, pricer.price());
  };
  EstimatorCache::Impl* ci = st.memo;
  if (!ci || p.zero < 0 || p.zero > 3) return own = compute();
  const DpKey key{ci->placement_gen, st.pp,      p.vpp,
                  layout_key(p),     grad_bytes, p.zero3_gather_per_tensor};
  if (ci->dp_for != key) {
    ci->dp_for = key;
    for (int z = 0; z < 4; ++z) {
      ci->dp_stages[static_cast<size_t>(z)].resize(static_cast<size_t>(st.pp));
      ci->dp_known[static_cast<size_t>(z)].assign(static_cast<size_t>(st.pp), 0);
    }
  }
  std::vector<DpStage>& stages = ci->dp_stages[static_cast<size_t>(p.zero)];
  std::vector<char>& known = ci->dp_known[static_cast<size_t>(p.zero)];
  if (!known[static_cast<size_t>(rank)]) {
    stages[static_cast<size_t>(rank)] = compute();
    known[static_cast<size_t>(rank)] = 1;
  }
  return stages[static_cast<size_t>(rank)];
}

// Where each pipeline stage's costs come from: the one StageTimes of a homogeneous cluster; with
// device groups, the stage loop of the group the stage lies in (priced on that group's profile
// through its own cache), while the estimate's StageTimes holds the combined per-stage times the
// pipeline is composed from.
struct StageSources {
  int n = 1;
  std::array<StageTimes*, kMaxDeviceGroups> st;
  std::array<const HardwareProfile*, kMaxDeviceGroups> hw;
  std::array<uint8_t, kMaxStages> group;  // written when n > 1
  int of(int i) const { return n == 1 ? 0 : group[static_cast<size_t>(i)]; }
};

// Each stage's device group (stage_device_group), or an InputError when one spans two.
void assign_groups(StageSources& src, const Cluster& c, const Plan& p, int pp) {
  src.n = c.groups_used();
  for (int i = 0; i < pp; ++i) {
    const int g = stage_device_group(c, p, i);
    if (g < 0) {
      const auto v = validate_against_cluster(c, Workload{}, p);
      throw InputError({}, v.empty() ? "--pp" : v.back().flag,
                       v.empty() ? "a pipeline stage spans two device groups" : v.back().reason);
    }
    src.group[static_cast<size_t>(i)] = static_cast<uint8_t>(g);
  }
}

// With device groups: every group's stage loop, and `st`'s per-stage times and breakdown taken
// from the group each stage lies in. Pipeline sends are priced at the slowest group's rate (a
// send between two groups crosses both groups' NICs; one rate for every send is what the
// schedules' time() takes). The distinct ranks are each group's, plus each group's first stage.
void combine_groups(StageTimes& st, StageSources& src, const ModelSpec& m, const Cluster& c,
                    const Workload& w, const Plan& p, StepCosts* detail) {
  EstimatorCache::Impl& ci = *st.memo;
  const int pp = st.pp;
  assign_groups(src, c, p, pp);
  std::vector<StepCosts> gd(detail ? static_cast<size_t>(src.n) : 0);
  double t_max = 0;
  for (int g = 0; g < src.n; ++g) {
    const auto gi = static_cast<size_t>(g);
    const Cluster& gc = *ci.group_clusters[gi];
    src.hw[gi] = &gc.profile;
    src.st[gi] = &prepare(nullptr, m, gc, w, p, ci.group_caches[gi].get(), true);
    run_stages(*src.st[gi], gc.profile, p, detail ? &gd[gi] : nullptr);
    t_max = std::max(t_max, src.st[gi]->t_p2p);
  }
  st.t_p2p = t_max;
  st.n_distinct = 0;
  int busiest = 0;
  double busiest_t = -1;
  for (int i = 0; i < pp; ++i) {
    const auto si = static_cast<size_t>(i);
    const int g = src.of(i);
    const StageTimes& s = *src.st[static_cast<size_t>(g)];
    const double hops = pp > 1 ? pipeline_exchanges_per_pass(i, pp, p.vpp) : 0;
    st.f[si] = s.f[si] + hops * (t_max - s.t_p2p);
    st.b[si] = s.b[si] + hops * (t_max - s.t_p2p);
    st.wg[si] = s.wg[si];
    st.compute[si] = s.compute[si];
    st.recompute[si] = s.recompute[si];
    st.overhead[si] = s.overhead[si];
    const bool starts_group = i == 0 || src.of(i - 1) != g;
    const bool distinct_in_group = std::find(s.distinct.begin(), s.distinct.begin() + s.n_distinct,
                                             i) != s.distinct.begin() + s.n_distinct;
    if (starts_group || distinct_in_group) st.distinct[static_cast<size_t>(st.n_distinct++)] = i;
    const double t = st.f[si] + st.b[si] + st.wg[si];
    if (t > busiest_t) {
      busiest_t = t;
      busiest = i;
    }
    if (detail) {
      if (detail->exposed_tp_cp_ep.size() != static_cast<size_t>(pp))
        detail->exposed_tp_cp_ep.assign(static_cast<size_t>(pp), {});
      detail->exposed_tp_cp_ep[si] = gd[static_cast<size_t>(g)].exposed_tp_cp_ep[si];
    }
  }
  const auto bi = static_cast<size_t>(busiest);
  st.busiest = busiest;
  st.busiest_t = busiest_t;
  st.busiest_comm = stage_comm(*src.st[static_cast<size_t>(src.of(busiest))], p, busiest, t_max);
  st.busiest_compute = st.compute[bi];
  st.busiest_recompute = st.recompute[bi];
  st.busiest_overhead = st.overhead[bi];
}

// With device groups: the memory of every stage against its group's GPU; the peak is the stage
// fullest for its GPU, `capacity` that GPU's memory.
void group_memory(MemoryPeak& out, double& capacity, const StageTimes& st, const StageSources& src,
                  const Cluster& c, const ModelSpec& m, const Workload& w, const Plan& p,
                  const IPipelineSchedule* sched) {
  double worst = -1;
  for (int i = 0; i < st.pp; ++i) {
    const StageMemory s = stage_memory(m, w, p, *sched, i, *st.counts, st.costs->activations,
                                       st.layers[static_cast<size_t>(i)]);
    const double cap =
        c.groups[static_cast<size_t>(src.of(i))].profile.gpu.memory_gib * units::kGiB;
    if (i == 0) out.first = s;
    if (i == st.pp - 1) out.last = s;
    if (s.total_bytes() / cap > worst) {
      worst = s.total_bytes() / cap;
      out.peak = s;
      out.peak_stage = i;
      out.peak_bytes = s.total_bytes();
      capacity = cap;
    }
  }
}

}  // namespace

Estimate estimate(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                  const EstimatorOptions& opt, EstimatorCache* cache, StepCosts* detail) {
  const HardwareProfile& hw = c.profile;
  if (c.heterogeneous() && !cache) {
    // Device groups are priced through per-group caches.
    EstimatorCache own;
    return estimate(m, c, w, p, opt, &own, detail);
  }
  Estimate e;
  alignas(StageTimes) unsigned char local[sizeof(StageTimes)];  // used without a cache only
  StageTimes& st = prepare(local, m, c, w, p, cache ? cache->impl_.get() : nullptr, true);
  StageSources src;
  src.st[0] = &st;
  src.hw[0] = &hw;
  if (c.heterogeneous())
    combine_groups(st, src, m, c, w, p, detail);
  else
    run_stages(st, hw, p, detail);
  const int pp = st.pp;
  const int mb = st.mb;
  e.microbatches = mb;
  const std::array<double, kMaxStages>& f = st.f;
  const std::array<double, kMaxStages>& b = st.b;
  const std::array<double, kMaxStages>& wg = st.wg;
  const RankLayers* stage_layers = st.layers;
  const int busiest = st.busiest;

  if (detail) {
    detail->f.assign(f.begin(), f.begin() + pp);
    detail->b.assign(b.begin(), b.begin() + pp);
    detail->w.assign(wg.begin(), wg.begin() + pp);
    for (int i = 0; i < pp; ++i) {
      const double hops = pp > 1 ? pipeline_exchanges_per_pass(i, pp, p.vpp) : 0;
      detail->f[static_cast<size_t>(i)] -= hops * st.t_p2p;
      detail->b[static_cast<size_t>(i)] -= hops * st.t_p2p;
    }
    detail->p2p_s = st.t_p2p;
    detail->p2p_bytes = st.costs->pp_message_bytes;
  }
  const IPipelineSchedule* sched = schedule_of(st, p);
  const PipelineTime pipe = pipeline_time(st, sched, p, /*rank_ends=*/true);
  if (detail) detail->pipeline_s = pipe.total_s;

  // Data-parallel communication per rank (dp_cost.h); the step waits for the rank that
  // exposes the most.
  const double grad_bytes = grad_bytes_per_param(p, w.precision);
  std::array<DpPricer, kMaxDeviceGroups> pricers;  // per device group
  for (int g = 0; g < src.n; ++g)
    pricers[static_cast<size_t>(g)] = {
        src.st[static_cast<size_t>(g)], src.hw[static_cast<size_t>(g)], {}, 0, 0};
  double group_optimizer_s = 0;  // with device groups: the slowest stage's optimizer step
  DpStage own_dp;                // without a cache
  ParamsOnRank busiest_prm;
  // The step waits for two ranks' reductions: the one whose reductions during the step (ZeRO-2's
  // per-micro-batch reduce-scatters, ZeRO-3's gathers) expose the most, which delays the whole
  // pipeline, and the one whose trailing reduction ends last.
  DpCost dp_early, dp_trail;
  // The SM and memory contention of the data-parallel collectives that run beside a rank's
  // compute (DpCost::hidden_s times the profile's comm_compute_slowdown): the most of any rank.
  double dp_contention_s = 0;
  int dp_rank = busiest, early_rank = busiest;
  bool early_any = false, trail_any = false;
  if (detail) {
    detail->dp_s.assign(p.zero == 3 ? 0 : static_cast<size_t>(pp), -1.0);
    detail->dp_last_share.assign(detail->dp_s.size(), 1.0);
    detail->zero3_fwd_bwd_s.assign(p.zero == 3 ? static_cast<size_t>(pp) : 0,
                                   std::array<double, 2>{-1.0, 0.0});
  }
  // The stage loop computed the distinct ranks only; the ranks after each one up to the next
  // hold the same layers and take the same times (they are never the busiest: it is the first
  // rank with the longest time). Their reduction is the same and only its slack and window
  // differ: each run is evaluated at its first rank and at its rank with the least slack.
  // `slack`: how much earlier than the step's last task rank i's last one ends; `window`: its
  // last weight-gradient task, which the bucketed reduction overlaps (the schedule's).
  auto consider = [&](int i, int like, const DpStage& ds, double slack) {
    const auto si = static_cast<size_t>(like);
    const int layers = std::max(1, stage_layers[si].total());
    const double window =
        st.rank_end[static_cast<size_t>(i)] - st.rank_grad_start[static_cast<size_t>(i)];
    const DpCost dc = dp_step_cost(ds, p, layers, mb, f[si], b[si] + wg[si], window, slack);
    dp_contention_s = std::max(
        dp_contention_s,
        src.hw[static_cast<size_t>(src.of(i))]->efficiency.comm_compute_slowdown * dc.hidden_s);
    const double early = dc.exposed_s - dc.trailing_exposed_s - dc.gather_exposed_s;
    const double early_time = dc.time_s - dc.trailing_s - dc.gather_s;
    if (!early_any || early > dp_early.exposed_s ||
        (early == dp_early.exposed_s && early_time > dp_early.time_s)) {
      dp_early = DpCost{};
      dp_early.time_s = early_time;
      dp_early.exposed_s = early;
      dp_early.bytes = dc.bytes - dc.trailing_bytes - dc.gather_bytes;
      early_rank = i;
      early_any = true;
    }
    if (!trail_any || dc.trailing_exposed_s > dp_trail.trailing_exposed_s ||
        (dc.trailing_exposed_s == dp_trail.trailing_exposed_s &&
         dc.trailing_s > dp_trail.trailing_s)) {
      dp_trail = dc;
      dp_rank = i;
      trail_any = true;
    }
    return dc;
  };
  for (int k = 0; k < st.n_distinct; ++k) {
    const int i = st.distinct[static_cast<size_t>(k)];
    const auto si = static_cast<size_t>(i);
    const auto gi = static_cast<size_t>(src.of(i));
    const DpStage& ds = dp_stage_of(*src.st[gi], m, p, i, grad_bytes, pricers[gi], own_dp);
    if (i == busiest) busiest_prm = ds.prm;  // the busiest rank is always a distinct one
    if (src.n > 1)
      group_optimizer_s = std::max(group_optimizer_s, optimizer_step_s(*src.hw[gi], w, p, ds.prm));
    const double slack = pipe.total_s - st.rank_end[si];
    const DpCost dc = consider(i, i, ds, slack);
    const int run_end = (k + 1 < st.n_distinct ? st.distinct[static_cast<size_t>(k) + 1] : pp) - 1;
    int least = i;
    for (int j = i + 1; j <= run_end; ++j)
      if (st.rank_end[static_cast<size_t>(j)] > st.rank_end[static_cast<size_t>(least)]) least = j;
    if (least != i) consider(least, i, ds, pipe.total_s - st.rank_end[static_cast<size_t>(least)]);
    if (detail) {
      if (p.zero == 3) {
        const double gathers_f = zero3_forward_gathers(p);
        const int layers = std::max(1, stage_layers[si].total());
        detail->zero3_fwd_bwd_s[si] = {layers * gathers_f * ds.layer_gather_s,
                                       layers * (ds.layer_gather_s + ds.layer_reduce_s)};
      } else {
        detail->dp_s[si] = dc.trailing_s;
        detail->dp_last_share[si] = ds.bucket_share;
      }
    }
  }
  if (detail) {
    // Ranks the loop skipped hold the same parameters as the rank before them.
    for (size_t i = 1; i < detail->dp_s.size(); ++i)
      if (detail->dp_s[i] < 0) {
        detail->dp_s[i] = detail->dp_s[i - 1];
        detail->dp_last_share[i] = detail->dp_last_share[i - 1];
      }
    for (size_t i = 1; i < detail->zero3_fwd_bwd_s.size(); ++i)
      if (detail->zero3_fwd_bwd_s[i][0] < 0)
        detail->zero3_fwd_bwd_s[i] = detail->zero3_fwd_bwd_s[i - 1];
    detail->dp_exposed_s = dp_trail.trailing_exposed_s;
  }
  // The rank named as the one the step waits for: the trailing reduction's, unless only the
  // reductions during the step are exposed.
  if (dp_trail.trailing_exposed_s <= 0 && dp_early.exposed_s > 0) dp_rank = early_rank;

  // The step's communication: the busiest rank's per micro-batch, the data-parallel rank the
  // step waits for, and the tied embedding's gradient all-reduce between the first and last
  // stages every step (Megatron _allreduce_embedding_grads), which nothing hides.
  CommLedger comm;
  for (int d = 0; d < kCommDims; ++d) {
    const CommCharge& x = st.busiest_comm[d];
    comm.charge(d, x.time_s, x.exposed_s, x.bytes, mb);
  }
  const int dp_dim = static_cast<int>(CommDim::kDP);
  comm.charge(dp_dim, dp_early.time_s, dp_early.exposed_s, dp_early.bytes);
  comm.charge(dp_dim, dp_trail.trailing_s, dp_trail.trailing_exposed_s, dp_trail.trailing_bytes);
  // The parameter all-gather after the optimizer (ZeRO 1-2), the trailing rank's, so that the
  // data-parallel traffic charged is one rank's (reports/derivations.cpp rebuilds it). The
  // first stage's gather delays the next step most (later stages' hide partly in the pipeline
  // fill, which this does not model); with even stages the ranks' gathers are alike.
  comm.charge(dp_dim, dp_trail.gather_s, dp_trail.gather_exposed_s, dp_trail.gather_bytes);
  // With multi-token prediction the last stage holds an embedding copy too, whose gradient is
  // all-reduced with the first stage's the same way (finalize_model_grads.py: "if
  // share_embeddings_and_output_weights or getattr(config, 'mtp_num_layers', 0)", @d98e8a6).
  if (pp > 1 && (m.tied_embeddings || m.mtp_layers > 0) &&
      loss_rank(p) != 0) {  // a V keeps both on rank 0
    // The two ends of each pipeline group, every group's at once: on one node when the
    // pipeline group is (NVLink), else one rank per node on its NIC rail (until 2026-12-07
    // always two nodes, each rank with its whole node's NICs).
    GroupPlacement g;
    g.size = 2;
    const Placements* pl = src.st[static_cast<size_t>(src.of(0))]->groups;
    const bool one_node = pl != nullptr && pl->pp.nodes == 1;
    g.ranks_per_node = one_node ? 2 : 1;
    g.nodes = one_node ? 1 : 2;
    g.node_gpus_busy = pl != nullptr ? pl->pp.node_gpus_busy : hw.node.gpus_per_node;
    const double bytes = static_cast<double>(m.vocab) * m.hidden / p.tp * grad_bytes;
    double t = 0;  // between the first and the last stage's groups: the slower
    for (int i : {0, pp - 1}) {
      const auto gi = static_cast<size_t>(src.of(i));
      t = std::max(t,
                   price_collective(*src.st[gi], *src.hw[gi], CollectiveOp::kAllReduce, bytes, g));
    }
    comm.charge(dp_dim, t, t, bytes);
  }
  const double exposed_dp = comm[dp_dim].exposed_s;

  e.optimizer_s = src.n > 1 ? group_optimizer_s : optimizer_step_s(hw, w, p, busiest_prm);

  // Breakdown of the busiest rank's time.
  e.busiest_stage = busiest;
  e.dp_stage = dp_rank;
  const double busy = mb * st.busiest_t;
  e.bubble_s = std::max(0.0, pipe.total_s - busy);
  for (int d = 0; d < kCommDims; ++d) {
    e.exposed_comm_s[d] = comm[d].exposed_s;
    e.comm_time_s[d] = comm[d].time_s;
    e.comm_volume_bytes[d] = comm[d].bytes;
  }
  e.recompute_s = mb * st.busiest_recompute;
  e.compute_s = mb * st.busiest_compute;
  e.overhead_s = mb * st.busiest_overhead;
  // Whatever of the busiest rank's time is neither compute nor exposed comm is the SM-contention
  // slowdown of overlapped communication; count it as compute.
  double accounted = e.compute_s + e.recompute_s + e.overhead_s;
  for (int d = 0; d < kCommDims; ++d)
    if (d != dp_dim) accounted += e.exposed_comm_s[d];
  e.compute_s += std::max(0.0, busy - accounted) + dp_contention_s;
  e.step_time_s = pipe.total_s + exposed_dp + dp_contention_s + e.optimizer_s;
  add_registered_step_terms(m, c, w, p, e);  // plug-in terms (step_terms.h)

  // Throughput and FLOP utilization.
  StepFlops fl;
  if (EstimatorCache::Impl* ci = st.memo) {
    const EstimatorCache::Impl::FlopsKey key{p.recompute, p.recompute_layers, p.pp,
                                             p.vpp,       w.global_batch,     opt.flops};
    if (ci->flops_for != key) {
      ci->flops = step_flops(m, *st.counts, w, p, opt.flops);
      ci->flops_for = key;
    }
    fl = ci->flops;
  } else {
    fl = step_flops(m, *st.counts, w, p, opt.flops);
  }
  const double n = c.num_gpus;
  double peak = hw.gpu.peak_flops(w.precision);
  if (src.n > 1) {  // the mean peak of the job's GPUs
    double sum = 0;
    for (int g = 0; g < src.n; ++g)
      sum += (c.group_first_rank(g + 1) - c.group_first_rank(g)) *
             c.groups[static_cast<size_t>(g)].profile.gpu.peak_flops(w.precision);
    peak = sum / n;
  }
  const double tokens = static_cast<double>(w.global_batch) * w.seq_len;
  e.model_flops = fl.model;
  e.hardware_flops = fl.model + fl.recompute;
  e.mfu = fl.model / (e.step_time_s * n * peak);
  e.hfu = e.hardware_flops / (e.step_time_s * n * peak);
  e.model_tflops_per_gpu = fl.model / (e.step_time_s * n) / 1e12;
  e.tokens_per_s = tokens / e.step_time_s;
  e.tokens_per_s_per_gpu = e.tokens_per_s / n;
  if (w.train_tokens > 0)
    e.time_to_train_days = w.train_tokens / e.tokens_per_s / units::kSecondsPerDay;
  e.bubble_fraction = e.bubble_s / e.step_time_s;
  e.comm_share = e.exposed_comm_total_s() / e.step_time_s;

  e.memory_capacity_bytes = hw.gpu.memory_gib * units::kGiB;
  alignas(MemoryPeak) unsigned char mem_local[sizeof(MemoryPeak)];
  MemoryPeak groups_mem;
  if (src.n > 1) group_memory(groups_mem, e.memory_capacity_bytes, st, src, c, m, w, p, sched);
  const MemoryPeak& mem = src.n > 1 ? groups_mem : memory_of(st, mem_local, m, w, p, sched);
  e.memory_first = mem.first;
  e.memory_last = mem.last;
  e.memory_peak = mem.peak;
  e.peak_stage = mem.peak_stage;
  e.fits = mem.peak_bytes <= e.memory_capacity_bytes;
  return e;
}

double peak_memory_bytes(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                         EstimatorCache* cache) {
  alignas(StageTimes) unsigned char local[sizeof(StageTimes)];  // used without a cache only
  StageTimes& st = prepare(local, m, c, w, p, cache ? cache->impl_.get() : nullptr, false);
  if (c.heterogeneous()) {
    StageSources src;
    assign_groups(src, c, p, st.pp);
    MemoryPeak mem;
    double capacity = 0;
    group_memory(mem, capacity, st, src, c, m, w, p, schedule_of(st, p));
    return mem.peak.total_bytes();
  }
  alignas(MemoryPeak) unsigned char mem_local[sizeof(MemoryPeak)];
  return memory_of(st, mem_local, m, w, p, schedule_of(st, p)).peak.total_bytes();
}

double step_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                       EstimatorCache* cache) {
  // step = pipeline + exposed DP communication (>= 0) + optimizer (memory time >= 0 plus the
  // fixed host floor below); the pipeline time does not depend on the ZeRO stage. The sums are
  // the estimate's own, in its order, and rounding is monotone, so the floor never exceeds it.
  if (c.heterogeneous() && !cache) {
    EstimatorCache own;
    return step_time_floor(m, c, w, p, &own);
  }
  alignas(StageTimes) unsigned char local[sizeof(StageTimes)];  // used without a cache only
  StageTimes& st = prepare(local, m, c, w, p, cache ? cache->impl_.get() : nullptr, true);
  double host_floor = optimizer_host_floor_s(c.profile);
  if (c.heterogeneous()) {
    // The estimate's optimizer step is its slowest stage's, never under any group's floor.
    StageSources src;
    combine_groups(st, src, m, c, w, p, nullptr);
    for (int g = 0; g < src.n; ++g)
      host_floor = std::min(host_floor, optimizer_host_floor_s(*src.hw[static_cast<size_t>(g)]));
  } else {
    run_stages(st, c.profile, p, nullptr);
  }
  const PipelineTime pipe = pipeline_time(st, schedule_of(st, p), p);
  return pipe.total_s + host_floor;
}

namespace {

// The busiest rank's ZeRO-3 gathers and reduce-scatters exposed during the step (dp_cost.h) for
// `mb` micro-batches with `slack` and `window`, as the estimate prices them for that rank.
double busiest_zero3_exposed_s(StageTimes& st, const ModelSpec& m, const Cluster& c,
                               const Workload& w, const Plan& p, int mb, double window,
                               double slack) {
  const auto bi = static_cast<size_t>(st.busiest);
  DpPricer pricer{&st, &c.profile, {}, 0, 0};
  DpStage own;
  const DpStage& ds =
      dp_stage_of(st, m, p, st.busiest, grad_bytes_per_param(p, w.precision), pricer, own);
  const int layers = std::max(1, st.layers[bi].total());
  const DpCost dc = dp_step_cost(ds, p, layers, mb, st.f[bi], st.b[bi] + st.wg[bi], window, slack);
  return std::max(0.0, dc.exposed_s - dc.trailing_exposed_s);
}

}  // namespace

double zero_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                       EstimatorCache* cache) {
  if (p.zero != 3 || c.heterogeneous()) return 0;
  alignas(StageTimes) unsigned char local[sizeof(StageTimes)];  // used without a cache only
  StageTimes& st = prepare(local, m, c, w, p, cache ? cache->impl_.get() : nullptr, true);
  run_stages(st, c.profile, p, nullptr);
  const PipelineTime pipe = pipeline_time(st, schedule_of(st, p), p, /*rank_ends=*/true);
  // As the estimate considers the busiest rank (always a distinct one): its slack and window.
  const auto bi = static_cast<size_t>(st.busiest);
  return busiest_zero3_exposed_s(st, m, c, w, p, st.mb, st.rank_end[bi] - st.rank_grad_start[bi],
                                 pipe.total_s - st.rank_end[bi]);
}

double microbatch_time_floor(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                             EstimatorCache* cache) {
  if (c.heterogeneous()) return 0;
  alignas(StageTimes) unsigned char local[sizeof(StageTimes)];  // used without a cache only
  StageTimes& st = prepare(local, m, c, w, p, cache ? cache->impl_.get() : nullptr, true);
  run_stages(st, c.profile, p, nullptr);
  // Each rank's compute per micro-batch: its passes less the exchanges charged inside them
  // (a schedule need not pay them all); no rank ends before m times it (the schedule contract).
  auto compute = [&](int i) {
    const auto k = static_cast<size_t>(i);
    const double hops = st.pp > 1 ? pipeline_exchanges_per_pass(i, st.pp, p.vpp) : 0;
    return std::max(0.0, st.f[k] + st.b[k] + st.wg[k] - 2 * hops * st.t_p2p);
  };
  double floor = 0;
  for (int i = 0; i < st.pp; ++i) floor = std::max(floor, compute(i));
  if (p.zero != 3) return floor;
  // ZeRO-3: the busiest rank's exposed gathers and reduce-scatters, max(0, mb * x - slack)
  // (dp_cost.h), with slack = step - its last task's end <= step - mb * compute (its end comes
  // after its compute): the step is at least mb * (compute + x). x: one micro-batch's, no slack.
  return std::max(floor, compute(st.busiest) + busiest_zero3_exposed_s(st, m, c, w, p, 1, 0, 0));
}

std::vector<StageMemory> all_stage_memory(const ModelSpec& m, const Workload& w, const Plan& p) {
  const IPipelineSchedule* s = plan_schedule(p);
  if (!s) s = find_schedule("1f1b");
  std::vector<StageMemory> out;
  out.reserve(static_cast<size_t>(p.pp));
  for (int i = 0; i < p.pp; ++i) out.push_back(stage_memory(m, w, p, *s, i));
  return out;
}

}  // namespace dtplan
