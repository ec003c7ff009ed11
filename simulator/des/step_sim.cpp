#include "simulator/des/step_sim.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "simulator/analytic/estimator.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/workload/op.h"

namespace dtplan::des {

bool simulator_supports(const std::string& s) {
  return s == "gpipe" || s == "1f1b" || s == "interleaved" || s == "zb-h1" || s == "zb-v" ||
         s == "dualpipe-v";
}

StepSimResult simulate_step(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p,
                            bool link_sharing, bool record_trace) {
  if (p.pp > 1 && !simulator_supports(p.schedule))
    throw InputError({}, "--schedule",
                     fmt::format("the discrete-event simulator orders gpipe, 1f1b, interleaved, "
                                 "zb-h1, zb-v and dualpipe-v pipelines; '{}' is estimated in "
                                 "closed form only",
                                 p.schedule));
  const bool v_shape = p.pp > 1 && (p.schedule == "zb-v" || p.schedule == "dualpipe-v");
  if (v_shape && p.vpp != 2)
    throw InputError(
        {}, "--vpp",
        fmt::format("schedule '{}' runs two chunks per rank in a V: pass --vpp 2", p.schedule));
  PipelineDetail d;
  StepSimResult r;
  r.estimate = estimate(m, c, w, p, {}, nullptr, &d);
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
  const PipelineOrder order = p.pp == 1 || p.schedule == "1f1b" ? PipelineOrder::kOneFOneB
                              : p.schedule == "gpipe"           ? PipelineOrder::kGPipe
                              : p.schedule == "zb-h1"           ? PipelineOrder::kZbH1
                              : p.schedule == "zb-v"            ? PipelineOrder::kZbV
                              : p.schedule == "dualpipe-v"      ? PipelineOrder::kDualPipeV
                                                                : PipelineOrder::kInterleaved;
  PipelineSimResult sim = simulate_pipeline(in, order, record_trace);
  r.pipeline_s = sim.makespan_s;
  // Live activations: the timeline's peak per stage against the schedule's statement; each
  // stage's memory (the memory model's) with its activation term scaled by the ratio.
  const IPipelineSchedule* sched = find_schedule(p.pp > 1 ? p.schedule : "1f1b");
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

  // Replace the closed-form pipeline by the simulated one; keep DP and optimizer.
  Estimate& e = r.estimate;
  const double rest = e.step_time_s - d.pipeline_s;
  e.step_time_s = sim.makespan_s + rest;
  // Everything the breakdown does not attribute otherwise is the simulated bubble, so the
  // breakdown still sums to the step time.
  e.bubble_s = std::max(0.0, e.step_time_s - (e.compute_s + e.recompute_s + e.overhead_s +
                                              e.optimizer_s + e.exposed_comm_total_s()));
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

std::string trace_json(const std::vector<TraceEvent>& trace, int stages) {
  std::string out = "{\"traceEvents\":[\n";
  for (int s = 0; s < stages; ++s) {
    out += fmt::format(
        "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"PP stage "
        "{}\"}}}},\n",
        s, s);
    out += fmt::format(
        "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":"
        "\"compute\"}}}},\n",
        s);
  }
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent& t = trace[i];
    out += fmt::format(
        "{{\"ph\":\"X\",\"name\":\"{}\",\"cat\":\"{}\",\"pid\":{},\"tid\":0,\"ts\":{:.3f},\"dur\":{"
        ":.3f}}}{}\n",
        t.name,
        t.name.find('&') != std::string::npos ? "fwd+bwd"
        : t.name[0] == 'F'                    ? "fwd"
                                              : "bwd",
        t.stage, t.start_s * 1e6, (t.end_s - t.start_s) * 1e6, i + 1 < trace.size() ? "," : "");
  }
  return out + "],\"displayTimeUnit\":\"ms\"}\n";
}

}  // namespace dtplan::des
