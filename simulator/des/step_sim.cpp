#include "simulator/des/step_sim.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "core/error.h"
#include "simulator/analytic/estimator.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/step/step_terms.h"
#include "simulator/workload/op.h"

namespace dtplan::des {

namespace {

// Global rank of a (tp, cp, dp, pp) coordinate under the plan's rank order (op_program.cpp's
// place_groups: tp innermost, then cp, then dp and pp, or pp inside dp).
int global_rank(const Plan& p, int dp_i, int pp_i, int tp_cp_i = 0) {
  const bool pp_in_dp = pp_inside_dp(p.rank_order);
  const int inner = p.tp * p.cp;
  return tp_cp_i + (pp_in_dp ? inner * (pp_i + p.pp * dp_i) : inner * (dp_i + p.dp * pp_i));
}

// The (dp, pp, tp/cp) coordinate of a global rank (the inverse of global_rank).
void coordinates(const Plan& p, int rank, int& dp_i, int& pp_i, int& inner_i) {
  const int inner = p.tp * p.cp;
  inner_i = rank % inner;
  const int outer = rank / inner;
  if (pp_inside_dp(p.rank_order)) {
    pp_i = outer % p.pp;
    dp_i = outer / p.pp;
  } else {
    dp_i = outer % p.dp;
    pp_i = outer / p.dp;
  }
}

}  // namespace

int stage_of_rank(const Plan& p, int rank) {
  int dp_i = 0, pp_i = 0, inner_i = 0;
  coordinates(p, rank, dp_i, pp_i, inner_i);
  return pp_i;
}

bool simulator_supports(const std::string& s) { return find_schedule(s) != nullptr; }

SimCost step_sim_cost(const Plan& p) {
  if (p.pp > 1 && !simulator_supports(p.schedule)) return {};
  // As simulate_step sets up its PipelineSimInput for one representative rank per stage.
  const int v = p.pp > 1 ? p.vpp : 1;
  const int m = std::max(1, p.num_microbatches());
  return sim_cost(p.pp, v, m, plan_schedule(p)->splits_weight_gradients(), false);
}

StepSimResult simulate_step(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                            const SimOptions& options, const SimFaults& faults) {
  const bool link_sharing = options.link_sharing, record_trace = options.record_trace,
             all_ranks = options.all_ranks;
  for (const auto& [g, f] : faults.slow_gpus)
    if (g < 0 || g >= c.num_gpus)
      throw InputError({}, "--slow-gpu",
                       fmt::format("rank {} is not one of the {} GPUs", g, c.num_gpus));
  for (const auto& [n, f] : faults.slow_links)
    if (n < 0 || n >= c.nodes())
      throw InputError({}, "--slow-link",
                       fmt::format("node {} is not one of the {} nodes", n, c.nodes()));
  if (all_ranks && c.num_gpus > options.max_ranks)
    throw InputError({}, "--ranks",
                     fmt::format("'all' simulates every GPU and is limited to {} GPUs ({} here; "
                                 "--max-ranks raises the limit); the default (one rank per "
                                 "stage) covers any size",
                                 options.max_ranks, c.num_gpus));
  if (p.pp > 1 && !simulator_supports(p.schedule)) {
    const auto v = validate_schedule(p);
    throw InputError({}, "--schedule", v.empty() ? "unknown schedule" : v.front().reason);
  }
  // The plan's own checks of its schedule (chunks, micro-batch count), for callers that did
  // not validate it.
  if (p.pp > 1)
    if (const auto v = validate_schedule(p); !v.empty())
      throw InputError({}, v.front().flag, v.front().reason);
  StepCosts d;
  StepSimResult r;
  r.estimate = estimate(m, c, w, p, {}, options.cache, &d);
  r.analytic_step_s = r.estimate.step_time_s;

  PipelineSimInput in;
  in.p = p.pp;
  in.v = p.pp > 1 ? p.vpp : 1;
  in.m = std::max(1, p.num_microbatches());
  in.f = d.f;
  in.b = d.b;
  in.w = d.w;
  in.p2p_bytes = d.p2p_bytes;
  in.p2p_bytes_per_s = d.p2p_s > 0 ? d.p2p_bytes / d.p2p_s : 0;  // a lone send takes p2p_s
  in.link_sharing = link_sharing;
  // Ranks on the cluster's links: stage s is represented by its first data-parallel replica
  // (its tp/cp/dp peers are identical); its DP ring neighbours are the nearest replicas on
  // other nodes when the group leaves the node (the ring's inter-node hops).
  in.hw = &c.profile;
  in.num_gpus = c.num_gpus;
  const int per_node = std::max(1, c.profile.node.gpus_per_node);
  if (all_ranks) {
    // Every GPU: replica (dp_i, tp/cp index) of every stage; DP rings in rank order.
    in.replicas = p.dp * p.tp * p.cp;
    for (int dp_i = 0; dp_i < p.dp; ++dp_i)
      for (int inner = 0; inner < p.tp * p.cp; ++inner)
        for (int s = 0; s < in.p; ++s) {
          in.gpu.push_back(global_rank(p, dp_i, s, inner));
          const bool ring = p.dp > 1;
          in.dp_succ.push_back(ring ? global_rank(p, (dp_i + 1) % p.dp, s, inner) : -1);
          in.dp_pred.push_back(ring ? global_rank(p, (dp_i + p.dp - 1) % p.dp, s, inner) : -1);
        }
  }
  for (int s = 0; s < in.p && !all_ranks; ++s) {
    const int self = global_rank(p, 0, s);
    in.gpu.push_back(self);
    int succ = -1, pred = -1;
    if (p.dp > 1) {
      succ = global_rank(p, 1, s);
      pred = global_rank(p, p.dp - 1, s);
      for (int k = 1; k < p.dp; ++k)
        if (global_rank(p, k, s) / per_node != self / per_node) {
          succ = global_rank(p, k, s);
          pred = global_rank(p, (p.dp - k) % p.dp, s);
          break;
        }
    }
    in.dp_succ.push_back(succ);
    in.dp_pred.push_back(pred);
  }
  const bool dp_simulated = static_cast<int>(d.dp_s.size()) == in.p;
  if (dp_simulated) {
    in.dp_s = d.dp_s;
    in.dp_last_share = d.dp_last_share;
  }
  in.dp_overlap = p.overlap_grad_reduce;
  in.comm_s = d.exposed_tp_cp_ep;
  in.zero3_s = d.zero3_fwd_bwd_s;
  in.sm_slowdown = link_sharing ? c.profile.efficiency.comm_compute_slowdown : 0.0;
  // Faults. A slow GPU slows its whole TP/CP group (they synchronise every layer); with one
  // rank per stage it is the representative of its stage (the step waits for the slowest
  // data-parallel replica at the gradient reduction). A slow node's NICs slow the links of the
  // ranks that use them; with one rank per stage, those of the stages it holds.
  if (!faults.slow_gpus.empty()) {
    in.slowdown.assign(in.gpu.size(), 1.0);
    r.slowed_by.assign(in.gpu.size(), std::string());
    for (const auto& [g, f] : faults.slow_gpus) {
      int dp_i = 0, pp_i = 0, inner_i = 0;
      coordinates(p, g, dp_i, pp_i, inner_i);
      for (size_t k = 0; k < in.gpu.size(); ++k) {
        int dk = 0, pk = 0, ik = 0;
        coordinates(p, in.gpu[k], dk, pk, ik);
        if (pk == pp_i && (!all_ranks || dk == dp_i) && f > in.slowdown[k]) {
          in.slowdown[k] = f;
          r.slowed_by[k] = in.gpu[k] == g ? fmt::format("slow x{:g}, --slow-gpu", f)
                                          : fmt::format("runs at GPU {}'s x{:g}, --slow-gpu", g, f);
        }
      }
    }
  }
  for (const auto& [n, f] : faults.slow_links) {
    if (all_ranks) {
      in.slow_nodes.emplace_back(n, f);
      continue;
    }
    for (int g = n * per_node; g < std::min(c.num_gpus, (n + 1) * per_node); ++g) {
      const int st = stage_of_rank(p, g);
      in.slow_nodes.emplace_back(in.gpu[static_cast<size_t>(st)] / per_node, f);
      // The representative's DP ring crosses the slow node's stage replicas.
      if (in.dp_succ[static_cast<size_t>(st)] >= 0)
        in.slow_nodes.emplace_back(in.dp_succ[static_cast<size_t>(st)] / per_node, f);
    }
  }
  in.jitter_sigma = faults.jitter_sigma;
  in.jitter_group = p.tp * p.cp;
  in.jitter_seed = faults.seed;
  in.reduce_symmetry = options.reduce_symmetry;
  const IPipelineSchedule* order = plan_schedule(p);
  in.hooks = options.hooks;
  PipelineSimResult sim = simulate_pipeline(in, *order, record_trace);
  // Live activations: the timeline's peak per stage against the schedule's statement; each
  // stage's memory (the memory model's) with its activation term scaled by the ratio.
  const IPipelineSchedule* sched = plan_schedule(p);
  const std::vector<StageMemory> stages = all_stage_memory(m, w, p);
  for (int s = 0; s < in.p; ++s) {
    const double des_peak = sim.peak_inflight_microbatches[static_cast<size_t>(s)];
    const double stated = sched ? sched->inflight_microbatches(s, in.p, in.v, in.m) : des_peak;
    r.peak_inflight_microbatches.push_back(des_peak);
    r.schedule_inflight_microbatches.push_back(stated);
    const StageMemory& mem = stages[static_cast<size_t>(s)];
    const double act = stated > 0 ? mem.activations_bytes * des_peak / stated : 0;
    r.peak_memory_bytes.push_back(mem.total_bytes() - mem.activations_bytes + act);
  }
  r.events = sim.events;
  r.trace = std::move(sim.trace);
  r.gpus = in.gpu;
  r.ranks = in.p * in.replicas;
  r.same_as = std::move(sim.same_as);
  r.end_s = std::move(sim.end_s);
  r.simulated_ranks = sim.simulated_ranks;
  r.replica_groups = sim.replica_groups;

  // Replace the closed-form pipeline and data-parallel reduction by the simulated ones; keep
  // the optimizer (and, with ZeRO-3, the closed form's per-layer gathers and reductions).
  Estimate& e = r.estimate;
  double rest = e.step_time_s - d.pipeline_s;
  if (dp_simulated) {
    rest -= d.dp_exposed_s;
    // Exposed DP from the timeline: what runs after the last compute task ends.
    const int dp = static_cast<int>(CommDim::kDP);
    e.exposed_comm_s[dp] += (sim.makespan_s - sim.pipeline_end_s) - d.dp_exposed_s;
    e.exposed_comm_s[dp] = std::max(0.0, e.exposed_comm_s[dp]);
  }
  r.pipeline_s = sim.pipeline_end_s;
  // Exposed pipeline communication from the timeline: the time the busiest stage's sends held
  // its compute stream while their bytes moved. The time a send waited for a busy receiver to
  // post its receive is pipeline idle time and stays in the bubble (as the closed form counts
  // it): the transfer itself is what a faster link would shorten.
  if (p.pp > 1 && e.busiest_stage < static_cast<int>(sim.send_moving_s.size()))
    e.exposed_comm_s[static_cast<int>(CommDim::kPP)] =
        sim.send_moving_s[static_cast<size_t>(e.busiest_stage)];
  e.step_time_s = sim.makespan_s + rest;
  // Everything the breakdown does not attribute otherwise is the simulated bubble, so the
  // breakdown still sums to the step time.
  e.bubble_s = std::max(0.0, e.step_time_s - step_terms_without_bubble_s(e));
  const double scale = r.analytic_step_s / e.step_time_s;
  e.mfu *= scale;
  e.hfu *= scale;
  e.model_tflops_per_gpu *= scale;
  e.tokens_per_s *= scale;
  e.tokens_per_s_per_gpu *= scale;
  if (e.time_to_train_days > 0) e.time_to_train_days /= scale;
  e.bubble_fraction = e.bubble_s / e.step_time_s;
  e.comm_share = e.exposed_comm_total_s() / e.step_time_s;
  return r;
}

TraceLayout trace_layout(const std::vector<TraceEvent>& trace,
                         const std::vector<TraceProcess>& processes) {
  TraceLayout l;
  l.process.assign(trace.size(), -1);
  l.thread.assign(trace.size(), 0);
  l.flow_shown.assign(trace.size(), 0);
  l.threads_used.assign(processes.size(), std::vector<bool>(1, true));
  std::unordered_map<int, int> pid_of;  // simulated rank -> its process
  for (size_t i = 0; i < processes.size(); ++i)
    pid_of.emplace(processes[i].rank, static_cast<int>(i));
  std::unordered_map<uint64_t, std::vector<size_t>> of;  // (rank, stream) -> its shown events
  std::unordered_map<long, int> flow_ends;               // flow id -> ends shown
  for (size_t e = 0; e < trace.size(); ++e) {
    const auto it = pid_of.find(trace[e].stage);
    if (it == pid_of.end()) continue;
    l.process[e] = it->second;
    of[(static_cast<uint64_t>(static_cast<uint32_t>(trace[e].stage)) << 8) |
       static_cast<uint64_t>(trace[e].stream)]
        .push_back(e);
    if (trace[e].flow >= 0) ++flow_ends[trace[e].flow];
  }
  std::vector<double> ends;  // per lane: when its last slice ends
  for (auto& [k, events] : of) {
    std::stable_sort(events.begin(), events.end(),
                     [&](size_t a, size_t b) { return trace[a].start_s < trace[b].start_s; });
    ends.clear();
    for (size_t e : events) {
      size_t lane = 0;
      while (lane < ends.size() && ends[lane] > trace[e].start_s) ++lane;
      if (lane == ends.size()) ends.push_back(0);
      ends[lane] = std::max(trace[e].start_s, trace[e].end_s);
      const size_t t = static_cast<size_t>(trace[e].stream) + kNumStreams * lane;
      l.thread[e] = static_cast<int>(t);
      std::vector<bool>& used = l.threads_used[static_cast<size_t>(l.process[e])];
      if (used.size() <= t) used.resize(t + 1, false);
      used[t] = true;
    }
  }
  for (size_t e = 0; e < trace.size(); ++e)
    l.flow_shown[e] =
        static_cast<char>(l.process[e] >= 0 && trace[e].flow >= 0 && flow_ends[trace[e].flow] == 2);
  return l;
}

std::string trace_thread_name(size_t thread) {
  const size_t lane = thread / kNumStreams;
  std::string name = stream_name(static_cast<StreamKind>(thread % kNumStreams));
  return lane > 0 ? fmt::format("{} ({})", name, lane + 1) : name;
}

const char* trace_category(const TraceEvent& t) {
  switch (t.stream) {
    case StreamKind::kCompute:
      return t.name.find('&') != std::string::npos ? "fwd+bwd" : t.name[0] == 'F' ? "fwd" : "bwd";
    case StreamKind::kDp:
      return "dp";
    case StreamKind::kTp:
      return "tp";
    case StreamKind::kCp:
      return "cp";
    case StreamKind::kEp:
      return "ep";
    default:
      return t.flow < 0 ? "pp wait" : "pp";  // a send waiting for its receive: pp wait
  }
}

std::string trace_json(const std::vector<TraceEvent>& trace,
                       const std::vector<TraceProcess>& processes) {
  std::string out;
  write_trace_json(trace, processes, [&](std::string_view piece) { out += piece; });
  return out;
}

void write_trace_json(const std::vector<TraceEvent>& trace,
                      const std::vector<TraceProcess>& processes, const TraceSink& sink) {
  const TraceLayout l = trace_layout(trace, processes);
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto add = [&](const std::string& e) {
    if (!first) out += ",\n";
    out += e;
    first = false;
    if (out.size() >= (1u << 20)) {
      sink(out);
      out.clear();
    }
  };
  for (size_t i = 0; i < processes.size(); ++i) {
    add(fmt::format(
        "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"{}\"}}}}", i,
        processes[i].name));
    for (size_t k = 0; k < l.threads_used[i].size(); ++k)
      if (l.threads_used[i][k])
        add(fmt::format(
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":"
            "\"{}\"}}}}",
            i, k, trace_thread_name(k)));
  }
  for (size_t e = 0; e < trace.size(); ++e) {
    if (l.process[e] < 0) continue;
    const TraceEvent& t = trace[e];
    const int pid = l.process[e], tid = l.thread[e];
    // Both ends rounded to the nanosecond the JSON prints, and the duration their difference:
    // rounding ts and dur apart let a slice end 1 ns after the next one on its thread began,
    // and Perfetto drops such a slice.
    const double ts = std::round(t.start_s * 1e9) / 1e3;
    const double dur = std::max(0.0, std::round(t.end_s * 1e9) / 1e3 - ts);
    add(fmt::format(
        "{{\"ph\":\"X\",\"name\":\"{}\",\"cat\":\"{}\",\"pid\":{},\"tid\":{},\"ts\":{:.3f},"
        "\"dur\":{:.3f}}}",
        t.name, trace_category(t), pid, tid, ts, dur));
    // Flow arrows (Chrome trace "s"/"f" events) from a send to its receive, both shown.
    if (l.flow_shown[e])
      add(fmt::format(
          "{{\"ph\":\"{}\",\"name\":\"p2p\",\"cat\":\"pp\",\"id\":{},\"pid\":{},\"tid\":{},"
          "\"ts\":{:.3f}{}}}",
          t.stream == StreamKind::kPpSend ? "s" : "f", t.flow, pid, tid,
          t.stream == StreamKind::kPpSend ? ts : ts + dur * 0.5,
          t.stream == StreamKind::kPpSend ? "" : ",\"bp\":\"e\""));
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  sink(out);
}

std::string trace_json(const std::vector<TraceEvent>& trace, int ranks,
                       const std::vector<int>& gpus, int pp) {
  std::vector<TraceProcess> processes;
  for (int s = 0; s < ranks; ++s) {
    const std::string gpu = static_cast<int>(gpus.size()) > s
                                ? fmt::format(" (GPU {})", gpus[static_cast<size_t>(s)])
                                : "";
    processes.push_back({s, fmt::format("PP stage {}{}", pp > 0 ? s % pp : s, gpu)});
  }
  return trace_json(trace, processes);
}

std::vector<TraceProcess> trace_processes(const StepSimResult& r, int pp,
                                          const std::vector<int>& shown) {
  auto same = [&](int k) {
    return static_cast<size_t>(k) < r.same_as.size() ? r.same_as[static_cast<size_t>(k)] : k;
  };
  auto gpu = [&](int k) {
    return static_cast<size_t>(k) < r.gpus.size() ? r.gpus[static_cast<size_t>(k)] : k;
  };
  std::vector<int> order;                         // timelines, in order of first appearance
  std::unordered_map<int, std::vector<int>> who;  // timeline -> the shown ranks that have it
  for (int k : shown) {
    auto [it, fresh] = who.try_emplace(same(k));
    if (fresh) order.push_back(same(k));
    it->second.push_back(k);
  }
  std::vector<TraceProcess> out;
  for (int t : order) {
    const std::vector<int>& ks = who[t];
    std::string name =
        fmt::format("PP stage {} (GPU {}", pp > 0 ? ks.front() % pp : ks.front(), gpu(ks.front()));
    // A timeline slowed by a --slow-gpu fault says so, and for which GPU it stands.
    if (static_cast<size_t>(ks.front()) < r.slowed_by.size() &&
        !r.slowed_by[static_cast<size_t>(ks.front())].empty())
      name += ", " + r.slowed_by[static_cast<size_t>(ks.front())];
    if (ks.size() > 1) {
      name += fmt::format(" and {} alike:", ks.size() - 1);
      for (size_t i = 1; i < std::min<size_t>(ks.size(), 9); ++i)
        name += fmt::format(" {}", gpu(ks[i]));
      if (ks.size() > 9) name += " ...";
    }
    out.push_back({t, name + ")"});
  }
  return out;
}

std::vector<int> default_trace_ranks(const StepSimResult& r, int pp) {
  std::vector<int> out;
  out.reserve(static_cast<size_t>(std::min(pp, r.ranks)) + 1);
  for (int s = 0; s < std::min(pp, r.ranks); ++s) out.push_back(s);  // the first replica
  int slowest = 0;
  for (size_t k = 0; k < r.end_s.size(); ++k)
    if (r.end_s[k] > r.end_s[static_cast<size_t>(slowest)]) slowest = static_cast<int>(k);
  if (slowest >= pp) out.push_back(slowest);
  return out;
}

}  // namespace dtplan::des
