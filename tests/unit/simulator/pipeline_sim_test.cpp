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

#include <nlohmann/json.hpp>

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
  auto j = nlohmann::json::parse(trace_json(r.trace, p.pp));
  ASSERT_TRUE(j.contains("traceEvents"));
  int meta = 0, slices = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M") {
      ++meta;
      EXPECT_TRUE(e["name"] == "process_name" || e["name"] == "thread_name");
      EXPECT_TRUE(e["args"].contains("name"));
    } else {
      ++slices;
      EXPECT_EQ(e["ph"], "X");
      EXPECT_GE(e["dur"].get<double>(), 0);
      EXPECT_LT(e["pid"].get<int>(), 8);
    }
  }
  EXPECT_EQ(meta, 2 * 8);                   // a process and a compute thread per stage
  EXPECT_EQ(slices, 8 * 3 * (64 / 4) * 2);  // stages x chunks x micro-batches x (F, B)
}

}  // namespace
}  // namespace dtplan::des
