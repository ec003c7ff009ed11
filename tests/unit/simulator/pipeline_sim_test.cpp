// The simulated pipeline reproduces the closed-form bubbles exactly for equal stage times
// (REFERENCE.md §4: (p-1)(F+B) for GPipe and 1F1B, (p-1)(F+B)/v interleaved, (p-1)(F+B-W)
// for ZB-H1 per Qi et al. 2024), and point-to-point
// transfers over shared links cost what a hand calculation says.
#include "simulator/des/pipeline_sim.h"

#include <gtest/gtest.h>

#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan::des {
namespace {

PipelineSimInput uniform(int p, int v, int m, double f, double b) {
  PipelineSimInput in;
  in.p = p;
  in.v = v;
  in.m = m;
  in.f.assign(static_cast<size_t>(p), f);
  in.b.assign(static_cast<size_t>(p), b);
  in.w.assign(static_cast<size_t>(p), 0.0);
  return in;
}

TEST(PipelineSim, OneFOneBAndGPipeBubbleIsClosedForm) {
  for (int p : {2, 4, 8})
    for (int m : {1, 4, 8, 32}) {
      const double f = 1.0, b = 2.0;
      const double expect = (m + p - 1) * (f + b);
      EXPECT_NEAR(simulate_pipeline(uniform(p, 1, m, f, b), PipelineOrder::kOneFOneB).makespan_s,
                  expect, 1e-9)
          << "1f1b p=" << p << " m=" << m;
      EXPECT_NEAR(simulate_pipeline(uniform(p, 1, m, f, b), PipelineOrder::kGPipe).makespan_s,
                  expect, 1e-9)
          << "gpipe p=" << p << " m=" << m;
    }
}

TEST(PipelineSim, InterleavedBubbleIsClosedForm) {
  for (int p : {2, 4})
    for (int v : {2, 3})
      for (int m : {p, 2 * p, 4 * p}) {
        const double f = 1.0, b = 2.0;
        const double expect = m * (f + b) + (p - 1) * (f + b) / v;
        EXPECT_NEAR(
            simulate_pipeline(uniform(p, v, m, f, b), PipelineOrder::kInterleaved).makespan_s,
            expect, 1e-9)
            << "p=" << p << " v=" << v << " m=" << m;
      }
}

TEST(PipelineSim, ZbH1BubbleIsClosedForm) {
  // Qi et al. (ICLR 2024): ZB-H1's bubble is (p-1)(F + B - W) with B the input-gradient pass,
  // for m >= p and W <= F; 1F1B with the same passes has (p-1)(F + B + W).
  struct Times {
    double f, b, w;
  };
  for (Times t : {Times{1, 1, 1}, Times{1, 1.2, 0.8}, Times{1, 2, 1}, Times{1, 1, 0.5}})
    for (int p : {2, 4, 8})
      for (int m : {p, 2 * p, 4 * p}) {
        PipelineSimInput in = uniform(p, 1, m, t.f, t.b);
        in.w.assign(static_cast<size_t>(p), t.w);
        const double work = m * (t.f + t.b + t.w);
        EXPECT_NEAR(simulate_pipeline(in, PipelineOrder::kZbH1).makespan_s,
                    work + (p - 1) * (t.f + t.b - t.w), 1e-9)
            << "zb-h1 p=" << p << " m=" << m << " F/B/W=" << t.f << "/" << t.b << "/" << t.w;
        EXPECT_NEAR(simulate_pipeline(in, PipelineOrder::kOneFOneB).makespan_s,
                    work + (p - 1) * (t.f + t.b + t.w), 1e-9)
            << "1f1b p=" << p << " m=" << m;
      }
}

TEST(PipelineSim, ZbH1RunsEveryPassOnce) {
  auto r = simulate_pipeline(uniform(4, 1, 8, 1.0, 1.0), PipelineOrder::kZbH1, true);
  EXPECT_EQ(r.trace.size(), 4u * 8 * 3);  // ranks x micro-batches x (F, B, W)
}

TEST(PipelineSim, LiveActivationsMatchWhatEachScheduleStates) {
  // The timeline's peak of micro-batches alive per rank equals the schedule plug-ins'
  // inflight_microbatches (1F1B and ZB-H1: p - s; GPipe: m; interleaved: Megatron's warm-up
  // of 2(p-s-1) + (v-1)p chunks plus one, over v), which the memory model uses.
  struct Case {
    PipelineOrder order;
    const char* schedule;
    int v;
  } cases[] = {{PipelineOrder::kOneFOneB, "1f1b", 1},
               {PipelineOrder::kGPipe, "gpipe", 1},
               {PipelineOrder::kInterleaved, "interleaved", 2},
               {PipelineOrder::kInterleaved, "interleaved", 3},
               {PipelineOrder::kZbH1, "zb-h1", 1}};
  for (const Case& c : cases)
    for (int p : {2, 4, 8})
      for (int m : {2 * p, 4 * p}) {
        PipelineSimInput in = uniform(p, c.v, m, 1.0, 2.0);
        in.w.assign(static_cast<size_t>(p), 0.5);
        auto r = simulate_pipeline(in, c.order);
        const IPipelineSchedule* s = find_schedule(c.schedule);
        ASSERT_NE(s, nullptr);
        for (int i = 0; i < p; ++i)
          EXPECT_NEAR(r.peak_inflight_microbatches[static_cast<size_t>(i)],
                      s->inflight_microbatches(i, p, c.v, m), 1e-9)
              << c.schedule << " v=" << c.v << " p=" << p << " m=" << m << " stage " << i;
      }
}

TEST(PipelineSim, SendsAddToTheCriticalPath) {
  // p = 2, m = 1: F0 (1 s) -> send (1 s) -> F1 (1 s) -> B1 (2 s) -> send (1 s) -> B0 (2 s) = 8 s.
  PipelineSimInput in = uniform(2, 1, 1, 1.0, 2.0);
  in.p2p_bytes = 100;
  in.p2p_bytes_per_s = 100;
  EXPECT_NEAR(simulate_pipeline(in, PipelineOrder::kOneFOneB).makespan_s, 8.0, 1e-9);
}

TEST(PipelineSim, TraceHasEveryTask) {
  auto r = simulate_pipeline(uniform(4, 2, 8, 1.0, 2.0), PipelineOrder::kInterleaved, true);
  EXPECT_EQ(r.trace.size(), 4u * 2 * 8 * 2);  // ranks x chunks x micro-batches x passes
  for (const auto& t : r.trace) EXPECT_LT(t.start_s, t.end_s);
}

}  // namespace
}  // namespace dtplan::des

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/catalog.h"
#include "simulator/des/step_sim.h"

namespace dtplan::des {
namespace {

// One cost model, two evaluators: with contention off the simulated step stays within 1% of the
// closed form for a grid of plans (the closed form charges every send to the critical path,
// the timeline overlaps some of them).
TEST(StepSim, AgreesWithTheClosedFormWithinOnePercent) {
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80g", 512);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 1536;
  struct Layout {
    int tp, pp, vpp;
    const char* schedule;
  } grid[] = {{8, 8, 3, "interleaved"}, {8, 16, 1, "1f1b"}, {4, 8, 2, "interleaved"},
              {8, 4, 1, "gpipe"},       {8, 1, 1, "1f1b"},  {4, 16, 2, "interleaved"},
              {8, 8, 1, "zb-h1"},       {4, 16, 1, "zb-h1"}};
  for (const Layout& l : grid) {
    Plan p;
    p.tp = l.tp;
    p.pp = l.pp;
    p.vpp = l.vpp;
    p.dp = 512 / (l.tp * l.pp);
    p.sp = true;
    p.zero = 1;
    p.recompute = Recompute::kFull;
    p.gbs = 1536;
    p.schedule = l.schedule;
    StepSimResult r = simulate_step(m, c, w, p, /*link_sharing=*/false);
    EXPECT_NEAR(r.estimate.step_time_s, r.analytic_step_s, 0.01 * r.analytic_step_s)
        << p.describe();
    double sum = r.estimate.compute_s + r.estimate.recompute_s + r.estimate.bubble_s +
                 r.estimate.optimizer_s + r.estimate.overhead_s + r.estimate.exposed_comm_total_s();
    EXPECT_NEAR(sum, r.estimate.step_time_s, 1e-6 * r.estimate.step_time_s);
  }
}

TEST(StepSim, TraceIsPerfettoJson) {
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80g", 256);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 64;
  Plan p;
  p.tp = 8;
  p.pp = 8;
  p.vpp = 3;
  p.dp = 4;
  p.sp = true;
  p.gbs = 64;
  p.schedule = "interleaved";
  StepSimResult r = simulate_step(m, c, w, p, true, true);
  auto j = nlohmann::json::parse(trace_json(r.trace, p.pp, r.gpus));
  ASSERT_TRUE(j.contains("traceEvents"));
  int processes = 0, threads = 0, compute = 0, sends = 0, recvs = 0, dp = 0;
  std::map<long, int> flow_ends;            // flow id -> count of "s" and "f" events
  std::vector<double> tp_by_stage(8, 0.0);  // microseconds
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") {
      EXPECT_TRUE(e["args"].is_object());
      if (e["name"] == "process_name") ++processes;
      if (e["name"] == "thread_name") ++threads;
      continue;
    }
    if (e["ph"] == "s" || e["ph"] == "f") {
      ++flow_ends[e["id"].get<long>()];
      continue;
    }
    EXPECT_EQ(e["ph"], "X");
    EXPECT_GE(e["dur"].get<double>(), 0);
    EXPECT_LT(e["pid"].get<int>(), 8);
    const std::string cat = e["cat"];
    if (cat == "fwd" || cat == "bwd") ++compute;
    if (cat == "pp")
      (e["tid"].get<int>() == static_cast<int>(StreamKind::kPpSend) ? sends : recvs)++;
    if (cat == "dp") ++dp;
    if (cat == "tp") tp_by_stage[e["pid"].get<size_t>()] += e["dur"].get<double>();
  }
  EXPECT_EQ(processes, 8);    // a process per simulated stage
  EXPECT_EQ(threads, 8 * 5);  // compute, tp, pp send, pp recv, dp on every stage (no cp, ep)
  // The exposed TP time on the trace is the cost model's: the busiest stage's TP slices add up
  // to the estimate's exposed TP communication.
  double tp_max = 0;
  for (int st = 0; st < 8; ++st) tp_max = std::max(tp_max, tp_by_stage[static_cast<size_t>(st)]);
  EXPECT_NEAR(tp_max * 1e-6, r.estimate.exposed_comm_s[0], 0.02 * r.estimate.exposed_comm_s[0]);
  EXPECT_EQ(compute, 8 * 3 * (64 / 4) * 2);  // stages x chunks x micro-batches x (F, B)
  // Every chunk boundary but the very first input and last output carries one activation
  // forward and one gradient backward per micro-batch: (p*v - 1) boundaries.
  EXPECT_EQ(sends, (8 * 3 - 1) * (64 / 4) * 2);
  EXPECT_EQ(recvs, sends);
  EXPECT_EQ(static_cast<int>(flow_ends.size()), sends);
  for (const auto& [id, n] : flow_ends) EXPECT_EQ(n, 2) << "flow " << id;
  // Bucketed reduction (the default --overlap-grad-reduce): the overlapped buckets and the
  // trailing last bucket on every stage.
  ASSERT_TRUE(p.overlap_grad_reduce);
  EXPECT_EQ(dp, 8 * 2);
}

}  // namespace
}  // namespace dtplan::des

namespace dtplan::des {
namespace {

// Contention on the cluster's links, checked against a hand calculation. Two stages on two
// nodes (GPU 0 and GPU 2, both on rail 0), one micro-batch, F = B = 1 s, a pipeline message
// that alone takes 1 s on a 25 GB/s NIC, and a data-parallel reduction of 2 s alone on stage 1
// (stage 0 has none). Timeline: F on stage 0 [0,1], activation [1,2], F and B on stage 1
// [2,4]; at t = 4 stage 1 starts both its gradient send to stage 0 and its reduction.
//  - DP ring neighbours on the same rail (GPU 0): both leave through GPU 2's rail-0 NIC, so
//    max-min fairness gives each 12.5 GB/s: the send ends at 4 + 2 = 6 (25 GB at half rate),
//    the reduction has 25 of its 50 GB left and ends at 7; stage 0's B runs [6,7]: step 7 s.
//  - Neighbours on the other rail (GPU 1, reached over NVLink first): no shared link; the send
//    ends at 5, B at 6, the reduction at 6: step 6 s, the slowdown vanishes.
PipelineSimInput two_node_input(const HardwareProfile& hw, int dp_neighbour, bool sharing) {
  PipelineSimInput in;
  in.p = 2;
  in.m = 1;
  in.f = {1.0, 1.0};
  in.b = {1.0, 1.0};
  in.w = {0.0, 0.0};
  in.p2p_bytes = 25e9;
  in.p2p_bytes_per_s = 25e9;
  in.link_sharing = sharing;
  in.hw = &hw;
  in.num_gpus = 4;
  in.gpu = {0, 2};
  in.dp_s = {0.0, 2.0};
  in.dp_pred = {-1, dp_neighbour};
  in.dp_succ = {-1, dp_neighbour};
  return in;
}

TEST(PipelineSim, DataParallelAndPipelineTrafficShareANic) {
  HardwareProfile hw;
  hw.node.gpus_per_node = 2;
  hw.node.nvlink_domain_gpus = 2;
  hw.node.nvlink_gbps_per_direction = 300;
  hw.scale_out.nics_per_node = 2;
  hw.scale_out.nic_gbps = 25;
  hw.scale_out.oversubscription = 1;

  auto same_rail = simulate_pipeline(two_node_input(hw, 0, true), PipelineOrder::kOneFOneB, true);
  EXPECT_NEAR(same_rail.makespan_s, 7.0, 1e-9);
  EXPECT_NEAR(same_rail.dp_end_s[1], 7.0, 1e-9);
  EXPECT_NEAR(same_rail.pipeline_end_s, 7.0, 1e-9);  // stage 0's B waited for the slow send

  auto other_rail = simulate_pipeline(two_node_input(hw, 1, true), PipelineOrder::kOneFOneB);
  EXPECT_NEAR(other_rail.makespan_s, 6.0, 1e-9);
  EXPECT_NEAR(other_rail.dp_end_s[1], 6.0, 1e-9);

  // --contention off: every transfer runs as if alone, on any rail.
  auto off = simulate_pipeline(two_node_input(hw, 0, false), PipelineOrder::kOneFOneB);
  EXPECT_NEAR(off.makespan_s, 6.0, 1e-9);

  // The trace shows the reduction on the dp stream and the send/receive pair of each message.
  int dp = 0, sends = 0;
  for (const TraceEvent& t : same_rail.trace) {
    dp += t.stream == StreamKind::kDp;
    sends += t.stream == StreamKind::kPpSend;
  }
  EXPECT_EQ(dp, 1);
  EXPECT_EQ(sends, 2);  // the activation forward and the gradient backward
}

}  // namespace
}  // namespace dtplan::des
