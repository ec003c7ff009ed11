// The symmetry reduction of `simulate --ranks all` (PipelineSimInput::reduce_symmetry) against
// the full simulation of every GPU: on a grid of small plans (three fabrics, of which one
// shares a NIC between two GPUs and one is an NVL72 rack; 1F1B and interleaved; contention on
// and off; a slow GPU, a slow node, jitter) the reduced run must give the same step, the same
// per-stage figures and the same timeline of every rank. The reference is the unreduced
// simulation itself (an independent computation: every replica on one engine and one flow
// network).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/catalog.h"
#include "simulator/des/step_sim.h"
#include "tests/unit/simulator/test_plans.h"

namespace dtplan::des {
namespace {

using Slice = std::tuple<int, int, std::string, double, double>;

// Every rank's slices: a rank that was not simulated has those of the rank it is alike.
std::vector<Slice> slices(const StepSimResult& r) {
  std::map<int, std::vector<const TraceEvent*>> of;
  for (const TraceEvent& t : r.trace) of[t.stage].push_back(&t);
  std::vector<Slice> out;
  EXPECT_EQ(static_cast<int>(r.same_as.size()), r.ranks);
  for (int k = 0; k < r.ranks; ++k)
    for (const TraceEvent* t : of[r.same_as[static_cast<size_t>(k)]])
      out.emplace_back(k, static_cast<int>(t->stream), t->name, t->start_s, t->end_s);
  std::sort(out.begin(), out.end());
  return out;
}

void expect_same(const StepSimResult& full, const StepSimResult& red, const std::string& what) {
  const double tol = 1e-12 * full.estimate.step_time_s;
  EXPECT_NEAR(red.estimate.step_time_s, full.estimate.step_time_s, tol) << what;
  EXPECT_NEAR(red.pipeline_s, full.pipeline_s, tol) << what;
  EXPECT_NEAR(red.estimate.bubble_s, full.estimate.bubble_s, tol) << what;
  for (size_t d = 0; d < full.estimate.exposed_comm_s.size(); ++d)
    EXPECT_NEAR(red.estimate.exposed_comm_s[d], full.estimate.exposed_comm_s[d], tol) << what;
  EXPECT_EQ(red.peak_inflight_microbatches, full.peak_inflight_microbatches) << what;
  EXPECT_EQ(red.ranks, full.ranks) << what;
  EXPECT_EQ(full.simulated_ranks, full.ranks) << what;
  EXPECT_EQ(red.end_s, full.end_s) << what;
  const std::vector<Slice> a = slices(full), b = slices(red);
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::get<0>(a[i]), std::get<0>(b[i])) << what;
    EXPECT_EQ(std::get<2>(a[i]), std::get<2>(b[i])) << what;
    EXPECT_NEAR(std::get<3>(a[i]), std::get<3>(b[i]), tol) << what;
    EXPECT_NEAR(std::get<4>(a[i]), std::get<4>(b[i]), tol) << what;
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(Symmetry, ReducedSimulationEqualsTheFullOneOnAGridOfPlans) {
  const ModelSpec m = load_model("llama3-8b");
  struct Fabric {
    const char* profile;
    int gpus;
  };
  int reduced_somewhere = 0, cases = 0;
  for (const Fabric f :
       {Fabric{"dgx-h100", 64}, Fabric{"hgx-a100-80g-4nic", 64}, Fabric{"gb200-nvl72", 128}}) {
    const Cluster c = load_cluster(f.profile, f.gpus);
    for (const auto& [tp, pp] : {std::pair{8, 2}, std::pair{2, 4}, std::pair{1, 4}})
      for (const char* schedule : {"1f1b", "interleaved"})
        for (const bool contention : {true, false})
          for (int fault = 0; fault < 4; ++fault) {
            const int dp = f.gpus / (tp * pp);
            Plan p = testing::megatron_plan(tp, pp, dp, static_cast<int64_t>(dp) * 8);
            p.schedule = schedule;
            p.vpp = std::string(schedule) == "interleaved" ? 2 : 1;
            const Workload w = testing::workload_for(p);
            SimFaults faults;
            if (fault == 1) faults.slow_gpus = {{5, 1.3}};
            if (fault == 2) faults.slow_links = {{1, 2.0}};
            if (fault == 3) faults.jitter_sigma = 0.05;
            SimOptions o;
            o.link_sharing = contention;
            o.record_trace = true;
            o.all_ranks = true;
            const StepSimResult red = simulate_step(m, c, w, p, o, faults);
            o.reduce_symmetry = false;
            const StepSimResult full = simulate_step(m, c, w, p, o, faults);
            const std::string what =
                fmt::format("{} {} GPUs TP{} PP{} DP{} {} contention {} fault {}", f.profile,
                            f.gpus, tp, pp, dp, schedule, contention, fault);
            expect_same(full, red, what);
            ++cases;
            reduced_somewhere += red.simulated_ranks < red.ranks;
            if (::testing::Test::HasFailure()) return;
          }
  }
  EXPECT_EQ(cases, 3 * 3 * 2 * 2 * 4);
  // The reduction is not vacuous: most of these plans have alike replicas.
  EXPECT_GT(reduced_somewhere, cases / 2);
}

// Where the replicas are alike and share no link, one replica is simulated for all of them;
// where two GPUs share a NIC (4 NICs for 8 GPUs) their TP peers share links and form groups;
// jitter keys the draws on the data-parallel replica, so only TP peers stay alike.
TEST(Symmetry, ReplicaGroupsFollowTheFabricAndTheFaults) {
  const ModelSpec m = load_model("llama3-8b");
  Plan p = testing::megatron_plan(8, 4, 4, 32);
  const Workload w = testing::workload_for(p);
  SimOptions o;
  o.all_ranks = true;
  const StepSimResult h100 = simulate_step(m, load_cluster("dgx-h100", 128), w, p, o);
  EXPECT_EQ(h100.ranks, 128);
  EXPECT_EQ(h100.replica_groups, 32);  // dp x tp replicas, each on its own rails
  EXPECT_EQ(h100.simulated_ranks, 4);  // one replica of 4 stages
  // 4 NICs for 8 GPUs: TP ranks 2k and 2k+1 share a NIC, so pairs of replicas interact.
  const StepSimResult a100 = simulate_step(m, load_cluster("hgx-a100-80g-4nic", 128), w, p, o);
  EXPECT_EQ(a100.replica_groups, 16);
  EXPECT_EQ(a100.simulated_ranks, 8);
  // Jitter: each data-parallel replica draws its own noise; its 8 TP ranks draw alike.
  SimFaults jitter;
  jitter.jitter_sigma = 0.05;
  const StepSimResult noisy = simulate_step(m, load_cluster("dgx-h100", 128), w, p, o, jitter);
  EXPECT_EQ(noisy.replica_groups, 32);
  EXPECT_EQ(noisy.simulated_ranks, 4 * 4);
}

// With one rank per stage, a slow GPU's stage runs at its pace on its representative, which is
// another GPU: the trace names which GPU the slowed timeline stands for (a new-user trial read
// "PP stage 0 (GPU 0)" slowed while GPU 13 was the slow one).
TEST(SlowGpu, TheTraceSaysWhichGpuASlowedTimelineStandsFor) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster c = load_cluster("dgx-h100", 64);
  const Plan p = testing::megatron_plan(8, 2, 4, 32);
  const Workload w = testing::workload_for(p);
  SimFaults faults;
  faults.slow_gpus = {{13, 1.5}};
  SimOptions o;
  o.record_trace = true;
  const StepSimResult r = simulate_step(m, c, w, p, o, faults);
  int named = 0;
  std::string names;
  for (const TraceProcess& t : trace_processes(r, p.pp, default_trace_ranks(r, p.pp))) {
    named += t.name.find("runs at GPU 13's x1.5, --slow-gpu") != std::string::npos;
    names += t.name + "\n";
  }
  EXPECT_EQ(named, 1) << names;
}

}  // namespace
}  // namespace dtplan::des
