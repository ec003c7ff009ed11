// Pipeline schedules are complete plug-ins (issue #14): the closed form, the memory statement,
// the simulator's task order and its send semantics all come from the schedule's own file.
// (1) Every registered schedule's task order is complete and runs without deadlock on the
// simulator. (2) A schedule defined in this file alone (plus its line in tests/CMakeLists.txt)
// is estimated, validated and simulated like the built-in ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/catalog.h"
#include "core/registry.h"
#include "simulator/analytic/estimator.h"
#include "simulator/des/pipeline_sim.h"
#include "simulator/des/step_sim.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "tests/unit/simulator/test_plans.h"

namespace dtplan {
namespace {

// 1F1B whose warm-up runs one forward more and whose steady state runs backward, then forward:
// the same task sequence as 1F1B up to where each rank's steady state starts, so the same
// bubble (p-1)(F+B) and the same activations (p - stage micro-batches).
class EagerOneFOneB final : public IPipelineSchedule {
 public:
  std::vector<ScheduleTask> task_order(int s, int p, int, int m) const override {
    std::vector<ScheduleTask> t;
    int f = 0, b = 0;
    for (; f < std::min(p - s, m); ++f) t.push_back({ScheduleTask::kF, f, 0});
    while (b < m) {
      t.push_back({ScheduleTask::kB, b++, 0});
      if (f < m) t.push_back({ScheduleTask::kF, f++, 0});
    }
    return t;
  }
  PipelineTime time(const PipelineInput& in) const override {
    return pipeline_time_with_bubble(in, 1.0);
  }
  double inflight_microbatches(int stage, int p, int, int m) const override {
    return std::min<double>(m, p - stage);
  }
};

}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, EagerOneFOneB, "test-eager-1f1b",
                "test-only example: 1F1B with the steady state's backward first")
namespace {

TEST(SchedulePlugins, EveryRegisteredOrderIsCompleteAndRuns) {
  for (const std::string& name : schedule_names()) {
    const IPipelineSchedule& s = *find_schedule(name);
    int runs = 0;
    for (int p : {2, 3, 4})
      for (int v : {1, 2, 3})
        for (int m : {1, 2, 3, 4, 6, 8, 12}) {
          if (!s.accepts_chunks(v) || !s.accepts_microbatches(p, v, m)) continue;
          for (int stage = 0; stage < p; ++stage) {
            // Each (micro-batch, chunk) runs its forward once and its backward once, and its
            // weight gradients once apart when the schedule splits them.
            std::map<std::tuple<int, int, int>, int> runs_of;  // (pass, mb, chunk)
            for (const ScheduleTask& t : s.task_order(stage, p, v, m)) {
              switch (t.pass) {
                case ScheduleTask::kF:
                case ScheduleTask::kB:
                case ScheduleTask::kW:
                  ++runs_of[{t.pass, t.mb, t.chunk}];
                  break;
                case ScheduleTask::kBW:
                  ++runs_of[{ScheduleTask::kB, t.mb, t.chunk}];
                  ++runs_of[{ScheduleTask::kW, t.mb, t.chunk}];
                  break;
                case ScheduleTask::kFB:
                  ++runs_of[{ScheduleTask::kF, t.mb, t.chunk}];
                  ++runs_of[{ScheduleTask::kB, t.mb2, t.chunk2}];
                  ++runs_of[{ScheduleTask::kW, t.mb2, t.chunk2}];
                  break;
              }
            }
            const int passes = s.splits_weight_gradients() ? 3 : 2;
            EXPECT_EQ(static_cast<int>(runs_of.size()), passes * m * v)
                << name << " p " << p << " v " << v << " m " << m << " stage " << stage;
            for (const auto& [key, n] : runs_of) EXPECT_EQ(n, 1) << name;
          }
          // On the timeline: finishes (no deadlock) and never beats the busy time.
          des::PipelineSimInput in;
          in.p = p;
          in.v = v;
          in.m = m;
          in.f.assign(static_cast<size_t>(p), 1.0);
          in.b.assign(static_cast<size_t>(p), 1.5);
          in.w.assign(static_cast<size_t>(p), 0.5);
          const des::PipelineSimResult r = des::simulate_pipeline(in, s);
          EXPECT_GE(r.makespan_s, m * 3.0 - 1e-9) << name << " p " << p << " v " << v;
          ++runs;
        }
    EXPECT_GT(runs, 0) << name << " ran on no (p, v, m)";
  }
}

// What the closed form's data-parallel overlap takes from a schedule, its rank's reduction
// window (the last backward task) and slack (how much earlier than the step's last backward
// that task ends), equals what the schedule's own task order does on the timeline, for every
// registered schedule, with equal stages and several pass ratios.
TEST(SchedulePlugins, ReductionWindowAndSlackFollowTheTaskOrder) {
  for (const std::string& name : schedule_names()) {
    const IPipelineSchedule& s = *find_schedule(name);
    for (const auto& [f, b, w] : {std::tuple{1.0, 1.4, 0.8}, std::tuple{1.0, 1.0, 1.0},
                                  std::tuple{1.0, 0.8, 1.0}, std::tuple{1.2, 1.0, 1.2}})
      for (int p : {2, 4, 8})
        for (int v : {1, 2, 3})
          for (int m : {2 * p, 4 * p}) {
            if (!s.accepts_chunks(v) || !s.accepts_microbatches(p, v, m)) continue;
            des::PipelineSimInput in;
            in.p = p;
            in.v = v;
            in.m = m;
            in.f.assign(static_cast<size_t>(p), f);
            in.b.assign(static_cast<size_t>(p), b);
            in.w.assign(static_cast<size_t>(p), w);
            const des::PipelineSimResult r = des::simulate_pipeline(in, s, /*record_trace=*/true);
            std::vector<double> end(static_cast<size_t>(p), 0), start(static_cast<size_t>(p), 0);
            for (const des::TraceEvent& t : r.trace) {
              if (t.stream != des::StreamKind::kCompute || t.name[0] == 'F') continue;
              const auto st = static_cast<size_t>(t.stage);
              if (t.end_s > end[st]) end[st] = t.end_s, start[st] = t.start_s;
            }
            const double last = *std::max_element(end.begin(), end.end());
            const PipelineInput pin{p, v, m, in.f.data(), in.b.data(), in.w.data()};
            for (int i = 0; i < p; ++i) {
              const auto si = static_cast<size_t>(i);
              EXPECT_NEAR(s.reduction_slack_s(i, pin), last - end[si], 1e-9)
                  << name << " p " << p << " v " << v << " m " << m << " rank " << i << " F:B:W "
                  << f << ":" << b << ":" << w;
              EXPECT_NEAR(s.reduction_window_s(i, pin), end[si] - start[si], 1e-9)
                  << name << " p " << p << " v " << v << " m " << m << " rank " << i;
            }
          }
  }
}

// Interleaved 1F1B with exchanges: the closed form (per-pass exchanges inside f and b as the
// estimator charges them, v/2 per pass, plus the fill and drain's 2(p-1) + (v-2)p) equals the
// plug-in's own order on the timeline, for every m. (1F1B's per-rank rule charges equal
// stages one exchange more than its timeline: 0.1 s in 22.1 s at p = 4, m = 4.)
TEST(SchedulePlugins, InterleavedFillAndDrainExchanges) {
  const double f = 1.0, b = 2.0, t = 0.1;
  for (const char* name : {"interleaved"})
    for (int p : {2, 4, 8})
      for (int v : {1, 2, 3, 4})
        for (int k : {1, 2, 4}) {
          const IPipelineSchedule& s = *find_schedule(name);
          const int m = k * p;
          if (!s.accepts_chunks(v) || !s.accepts_microbatches(p, v, m)) continue;
          des::PipelineSimInput in;
          in.p = p;
          in.v = v;
          in.m = m;
          in.f.assign(static_cast<size_t>(p), f);
          in.b.assign(static_cast<size_t>(p), b);
          in.w.assign(static_cast<size_t>(p), 0.0);
          in.p2p_bytes = 1e6;
          in.p2p_bytes_per_s = 1e6 / t;  // one exchange takes t alone
          const double sim = des::simulate_pipeline(in, s).makespan_s;
          std::vector<double> fc(static_cast<size_t>(p)), bc(static_cast<size_t>(p));
          for (int i = 0; i < p; ++i) {
            const double hops = pipeline_exchanges_per_pass(i, p, v);
            fc[static_cast<size_t>(i)] = f + hops * t;
            bc[static_cast<size_t>(i)] = b + hops * t;
          }
          const PipelineInput pin{p, v, m, fc.data(), bc.data(), in.w.data(), t};
          EXPECT_NEAR(s.time(pin).total_s, sim, 1e-9)
              << name << " p " << p << " v " << v << " m " << m;
        }
}

TEST(SchedulePlugins, ATestOnlyScheduleIsEstimatedValidatedAndSimulated) {
  const std::vector<std::string> names = schedule_names();
  ASSERT_NE(std::find(names.begin(), names.end(), "test-eager-1f1b"), names.end());
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80g", 256);
  Plan p = testing::megatron_plan(8, 8, 4, 256);
  const Workload w = testing::workload_for(p);
  p.schedule = "test-eager-1f1b";
  EXPECT_TRUE(validate_schedule(p).empty());
  const Estimate eager = estimate(m, c, w, p);
  p.schedule = "1f1b";
  const Estimate one_f_one_b = estimate(m, c, w, p);
  // Same bubble formula and memory as 1F1B (its definition above).
  EXPECT_DOUBLE_EQ(eager.step_time_s, one_f_one_b.step_time_s);
  EXPECT_DOUBLE_EQ(eager.memory_peak.total_bytes(), one_f_one_b.memory_peak.total_bytes());
  p.schedule = "test-eager-1f1b";
  ASSERT_TRUE(des::simulator_supports(p.schedule));
  const des::StepSimResult r = des::simulate_step(m, c, w, p, /*link_sharing=*/false);
  EXPECT_NEAR(r.estimate.step_time_s, r.analytic_step_s, 0.01 * r.analytic_step_s);
}

}  // namespace
}  // namespace dtplan
