// Heterogeneous clusters (issue #18 item 2): device groups of different GPU generations in one
// job, each pipeline stage priced on the group its ranks lie in. Expected values come from
// independent computations: the homogeneous estimates of each group's profile (a stage's costs
// must be its group's), the mean of the groups' datasheet peaks (MFU), every stage's memory
// against its own GPU, and the simulator's timeline of the same per-stage costs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/catalog.h"
#include "core/error.h"
#include "core/units.h"
#include "planner/i_evaluator.h"
#include "planner/search.h"
#include "simulator/analytic/estimator.h"
#include "simulator/des/step_sim.h"
#include "simulator/step/step_costs.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {
namespace {

Cluster groups_of(const std::vector<std::pair<std::string, int>>& groups) {
  Cluster c;
  for (const auto& [name, nodes] : groups) {
    DeviceGroup d;
    d.profile = load_profile(name);
    d.nodes = nodes;
    c.groups.push_back(d);
    c.num_gpus += nodes * d.profile.node.gpus_per_node;
  }
  c.profile = c.groups.front().profile;
  return c;
}

Cluster homogeneous(const std::string& name, int gpus) {
  Cluster c;
  c.profile = load_profile(name);
  c.num_gpus = gpus;
  return c;
}

Workload work(int64_t gbs) {
  Workload w;
  w.global_batch = gbs;
  w.seq_len = 2048;
  return w;
}

Plan plan(int tp, int pp, int dp, int zero, int64_t gbs, int vpp = 1) {
  Plan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.vpp = vpp;
  p.sp = tp > 1;
  p.zero = zero;
  p.gbs = gbs;
  p.mbs = 1;
  p.schedule = vpp > 1 ? "interleaved" : "1f1b";
  return p;
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(1e-30, std::fabs(b)); }

// Two groups of the same profile are one homogeneous cluster: every figure is the same.
TEST(Heterogeneous, SameProfileGroupsEqualTheHomogeneousCluster) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster mixed = groups_of({{"dgx-a100-80g", 2}, {"dgx-a100-80g", 2}});
  const Cluster one = homogeneous("dgx-a100-80g", 32);
  ASSERT_TRUE(mixed.heterogeneous());
  ASSERT_EQ(mixed.num_gpus, 32);
  for (const Plan& p : {plan(8, 2, 2, 1, 64), plan(8, 4, 1, 0, 64), plan(4, 4, 2, 3, 64),
                        plan(8, 4, 1, 1, 64, 2), plan(2, 2, 8, 2, 64)}) {
    const Workload w = work(64);
    ASSERT_TRUE(validate_against_cluster(mixed, w, p).empty()) << p.describe();
    const Estimate a = estimate(m, mixed, w, p), b = estimate(m, one, w, p);
    EXPECT_LT(rel(a.step_time_s, b.step_time_s), 1e-12) << p.describe();
    EXPECT_LT(rel(a.mfu, b.mfu), 1e-12) << p.describe();
    EXPECT_LT(rel(a.bubble_s + 1, b.bubble_s + 1), 1e-12) << p.describe();
    EXPECT_DOUBLE_EQ(a.memory_peak.total_bytes(), b.memory_peak.total_bytes()) << p.describe();
    EXPECT_EQ(a.peak_stage, b.peak_stage) << p.describe();
    for (int d = 0; d < kCommDims; ++d) {
      EXPECT_LT(rel(a.exposed_comm_s[d] + 1, b.exposed_comm_s[d] + 1), 1e-12) << p.describe();
      EXPECT_LT(rel(a.comm_volume_bytes[d] + 1, b.comm_volume_bytes[d] + 1), 1e-12);
    }
    EXPECT_LT(rel(a.optimizer_s, b.optimizer_s), 1e-12) << p.describe();
  }
}

// Llama 3 8B, TP8 PP4 on two DGX H100 nodes then two DGX A100 nodes: stages 0-1 on H100s,
// stages 2-3 on A100s. Each stage's compute is what the homogeneous cluster of its group's
// profile gives that stage; every send takes the slower group's time.
TEST(Heterogeneous, EachStageIsPricedOnItsGroupsProfile) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster mixed = groups_of({{"dgx-h100", 2}, {"dgx-a100-80g", 2}});
  const Workload w = work(64);
  const Plan p = plan(8, 4, 1, 0, 64);
  ASSERT_EQ(stage_device_group(mixed, p, 0), 0);
  ASSERT_EQ(stage_device_group(mixed, p, 1), 0);
  ASSERT_EQ(stage_device_group(mixed, p, 2), 1);
  ASSERT_EQ(stage_device_group(mixed, p, 3), 1);
  StepCosts d, dh, da;
  const Estimate e = estimate(m, mixed, w, p, {}, nullptr, &d);
  const Estimate eh = estimate(m, homogeneous("dgx-h100", 32), w, p, {}, nullptr, &dh);
  const Estimate ea = estimate(m, homogeneous("dgx-a100-80g", 32), w, p, {}, nullptr, &da);
  for (size_t i = 0; i < 4; ++i) {
    const StepCosts& g = i < 2 ? dh : da;
    EXPECT_DOUBLE_EQ(d.f[i], g.f[i]) << i;
    EXPECT_DOUBLE_EQ(d.b[i], g.b[i]) << i;
    EXPECT_DOUBLE_EQ(d.w[i], g.w[i]) << i;
    EXPECT_EQ(d.exposed_tp_cp_ep[i], g.exposed_tp_cp_ep[i]) << i;
  }
  // The A100 nodes' NICs (8 x 200 Gb/s) are slower than the H100 nodes' (8 x 400 Gb/s).
  ASSERT_GT(da.p2p_s, dh.p2p_s);
  EXPECT_DOUBLE_EQ(d.p2p_s, da.p2p_s);
  // The A100 stages are the slower ones: the step lies between the two homogeneous ones.
  EXPECT_GT(e.step_time_s, eh.step_time_s);
  EXPECT_LE(e.step_time_s, ea.step_time_s * (1 + 1e-12));
  EXPECT_GE(e.busiest_stage, 2);
  // MFU against the mean peak of the job's GPUs: 16 H100 and 16 A100 at their datasheet BF16
  // dense peaks (the profiles' values).
  const double peak_sum = 16 * load_profile("dgx-h100").gpu.peak_flops(w.precision) +
                          16 * load_profile("dgx-a100-80g").gpu.peak_flops(w.precision);
  EXPECT_LT(rel(e.mfu, e.model_flops / (e.step_time_s * peak_sum)), 1e-12);
  EXPECT_LT(rel(e.model_flops, eh.model_flops), 1e-12);
}

// The simulator schedules the same per-stage costs: without link sharing its 1F1B timeline is
// the closed form's (as on a homogeneous cluster, tests/unit/simulator/des_test.cpp).
TEST(Heterogeneous, SimulatorAgreesWithTheClosedForm) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster mixed = groups_of({{"dgx-h100", 3}, {"dgx-a100-80g", 1}});
  const Workload w = work(64);
  for (const Plan& p : {plan(8, 4, 1, 0, 64), plan(4, 8, 1, 1, 64), plan(2, 4, 4, 1, 64)}) {
    ASSERT_TRUE(validate_against_cluster(mixed, w, p).empty()) << p.describe();
    const des::StepSimResult r = des::simulate_step(m, mixed, w, p, /*link_sharing=*/false);
    EXPECT_LT(rel(r.estimate.step_time_s, r.analytic_step_s), 0.01) << p.describe();
  }
  // The A100 group first: the slowest stage is the first, whose warm-up forwards hide part of
  // the round trip through the faster ranks after it; 1F1B's closed form (the longest path
  // through some rank, schedule/impl/one_f_one_b.cpp) counts only what they do not hide.
  // (Until 2026-12-02 it took m max t + sum t - max t, an upper bound up to 10% above.)
  const Cluster a100_first = groups_of({{"dgx-a100-80g", 1}, {"dgx-h100", 3}});
  const Plan p = plan(8, 4, 1, 0, 64);
  const des::StepSimResult r = des::simulate_step(m, a100_first, w, p, /*link_sharing=*/false);
  EXPECT_LT(rel(r.estimate.step_time_s, r.analytic_step_s), 0.01);
}

// Every stage's memory against its own GPU: an A100 40GB group and an A100 80GB group.
TEST(Heterogeneous, MemoryFitsPerStageGPU) {
  const ModelSpec m = load_model("llama3-8b");
  Workload w = work(64);
  w.seq_len = 2560;
  int checked = 0, only_one_order = 0;
  Plan no_sp = plan(2, 2, 8, 0, 64);
  no_sp.sp = false;
  for (const Plan& p : {no_sp, plan(1, 2, 16, 1, 64)}) {
    const Cluster big_first = groups_of({{"dgx-a100-80g", 2}, {"dgx-a100-40g", 2}});
    const Cluster small_first = groups_of({{"dgx-a100-40g", 2}, {"dgx-a100-80g", 2}});
    bool fits[2];
    for (int k = 0; k < 2; ++k) {
      const Cluster& c = k == 0 ? big_first : small_first;
      const Estimate e = estimate(m, c, w, p);
      // Independently: each stage's memory (all_stage_memory) against its group's GPU.
      const auto stages = all_stage_memory(m, w, p);
      bool all = true;
      double worst = 0;
      int worst_stage = 0;
      for (int s = 0; s < p.pp; ++s) {
        const double cap =
            (stage_device_group(c, p, s) == (k == 0 ? 0 : 1) ? 80.0 : 40.0) * units::kGiB;
        all = all && stages[static_cast<size_t>(s)].total_bytes() <= cap;
        const double ratio = stages[static_cast<size_t>(s)].total_bytes() / cap;
        if (ratio > worst) {
          worst = ratio;
          worst_stage = s;
        }
      }
      EXPECT_EQ(e.fits, all) << p.describe() << " order " << k;
      EXPECT_EQ(e.peak_stage, worst_stage);
      EXPECT_DOUBLE_EQ(e.memory_peak.total_bytes() / e.memory_capacity_bytes, worst);
      EXPECT_DOUBLE_EQ(peak_memory_bytes(m, c, w, p), e.memory_peak.total_bytes());
      fits[k] = e.fits;
      ++checked;
    }
    if (fits[0] != fits[1]) ++only_one_order;
  }
  EXPECT_EQ(checked, 4);
  // TP2 PP2 DP8 without ZeRO or SP at 2,560 tokens: stage 0 holds 40.9 GiB, stage 1 38.5 GiB (the
  // memory model's, as `estimate` prints them): it fits only with the 80 GB group first.
  EXPECT_GE(only_one_order, 1);
}

TEST(Heterogeneous, StagesAcrossGroupsAreRefused) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster mixed = groups_of({{"dgx-h100", 3}, {"dgx-a100-80g", 1}});
  const Workload w = work(64);
  // 32 GPUs in PP2: stage 1 holds ranks 16-31, and the A100 group starts at rank 24.
  const Plan p = plan(8, 2, 2, 0, 64);
  EXPECT_EQ(stage_device_group(mixed, p, 1), -1);
  const auto v = validate_against_cluster(mixed, w, p);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].flag, "--pp");
  EXPECT_NE(v[0].reason.find("stage 1 (ranks 16-31)"), std::string::npos) << v[0].reason;
  EXPECT_THROW(estimate(m, mixed, w, p), InputError);
  Plan q = plan(8, 4, 1, 0, 64);
  q.rank_order = RankOrder::kTpCpEpPpDp;
  const auto vq = validate_against_cluster(mixed, w, q);
  ASSERT_FALSE(vq.empty());
  EXPECT_EQ(vq[0].flag, "--rank-order");
}

// The search visits only layouts whose stages lie inside groups, names the others, and its
// best plan's figures are the estimator's.
TEST(Heterogeneous, SearchKeepsEveryStageInsideOneGroup) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster mixed = groups_of({{"dgx-h100", 3}, {"dgx-a100-80g", 1}});
  const Workload w = work(64);
  SearchSpace space;
  SearchOptions opt;
  opt.threads = 1;
  const SearchResult r = search(m, mixed, w, space, opt, AnalyticEvaluator{});
  ASSERT_FALSE(r.top.empty());
  EXPECT_GT(r.rejected[static_cast<size_t>(Rejection::kDeviceGroups)], 0);
  for (const Candidate& c : r.top)
    for (int s = 0; s < c.plan.pp; ++s)
      EXPECT_GE(stage_device_group(mixed, c.plan, s), 0) << c.plan.describe();
  Workload wb = w;
  wb.global_batch = r.top[0].plan.gbs;
  const Estimate e = estimate(m, mixed, wb, r.top[0].plan);
  EXPECT_DOUBLE_EQ(e.step_time_s, r.top[0].estimate.step_time_s);
  // Without pruning the same ranking.
  SearchOptions full = opt;
  full.prune = false;
  const SearchResult f = search(m, mixed, w, space, full, AnalyticEvaluator{});
  ASSERT_EQ(f.top.size(), r.top.size());
  for (size_t k = 0; k < r.top.size(); ++k)
    EXPECT_EQ(f.top[k].plan.describe(), r.top[k].plan.describe()) << k;
}

// --stage-split K:A: the first K stages hold A layers, the others the rest evenly.
TEST(StageSplit, LayersMemoryAndValidation) {
  const ModelSpec m = load_model("llama3-8b");  // 32 layers
  const Workload w = work(64);
  Plan p = plan(8, 4, 1, 0, 64);
  p.split_stages = 2;
  p.split_layers = 10;  // 10 + 10 + 6 + 6
  EXPECT_TRUE(validate_plan(m, 32, w, p).empty());
  const int want[4] = {10, 10, 6, 6};
  for (int s = 0; s < 4; ++s) EXPECT_EQ(layers_on_rank(m, p, s).total(), want[s]) << s;
  // The memory peak is the largest of every stage's (the second part's first stage included).
  for (int k : {1, 2, 3})
    for (int a = 1; a * k < 32; ++a) {
      Plan q = plan(2, 4, 4, 1, 64);
      q.split_stages = k;
      q.split_layers = a;
      if (!validate_plan(m, 32, w, q).empty()) continue;
      double worst = 0;
      for (const StageMemory& sm : all_stage_memory(m, w, q))
        worst = std::max(worst, sm.total_bytes());
      EXPECT_DOUBLE_EQ(estimate(m, homogeneous("dgx-a100-80g", 32), w, q).memory_peak.total_bytes(),
                       worst)
          << q.describe();
    }
  Plan bad = p;
  bad.split_stages = 3;
  bad.split_layers = 8;  // 32 - 24 = 8 on the last stage: valid
  EXPECT_TRUE(validate_plan(m, 32, w, bad).empty());
  bad = p;
  bad.split_layers = 16;  // leaves 0 for the other two
  auto v = validate_plan(m, 32, w, bad);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v[0].flag, "--stage-split");
  bad = p;
  bad.split_layers = 9;  // 32 - 18 = 14 over 2 stages: 7 each, valid
  EXPECT_TRUE(validate_plan(m, 32, w, bad).empty());
  bad.split_stages = 4;  // K must leave a second part
  EXPECT_FALSE(validate_plan(m, 32, w, bad).empty());
  bad = p;
  bad.vpp = 2;
  bad.schedule = "interleaved";
  v = validate_plan(m, 32, w, bad);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.back().flag, "--stage-split");
}

// On H100s followed by A100s the search gives the H100 stages more layers: an H100's BF16
// dense peak is 989 TFLOP/s against an A100's 312 (datasheets), so an even split leaves the
// H100 stages idle most of the time.
TEST(StageSplit, SearchLoadsTheFasterGroupMore) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster mixed = groups_of({{"dgx-h100", 2}, {"dgx-a100-80g", 2}});
  const Workload w = work(64);
  SearchSpace space;
  space.tp = {8};
  space.pp = {4};
  SearchOptions opt;
  opt.threads = 1;
  const SearchResult r = search(m, mixed, w, space, opt, AnalyticEvaluator{});
  ASSERT_FALSE(r.top.empty());
  const Plan& best = r.top[0].plan;
  ASSERT_GT(best.split_stages, 0) << best.describe();
  EXPECT_EQ(best.split_stages, 2);
  EXPECT_GT(layers_on_rank(m, best, 0).total(), layers_on_rank(m, best, 3).total());
  // Faster than the best even split.
  double even = 1e30;
  for (const Candidate& c : r.top)
    if (c.plan.split_stages == 0) even = std::min(even, c.estimate.step_time_s);
  EXPECT_LT(r.top[0].estimate.step_time_s, even);
}

// A V-shaped schedule's second chunk runs back down to rank 0, which holds the loss
// (simulator/schedule/task_flow.h, holds_loss): the output layer's time and weights are rank 0's,
// not the last rank's, and the step's work is the same as interleaving's with two chunks.
TEST(VSchedules, TheOutputLayerIsOnRankZero) {
  const ModelSpec m = load_model("llama3-8b");  // untied output layer
  const Cluster c = homogeneous("dgx-h100", 32);
  const Workload w = work(64);
  Plan inter = plan(8, 4, 1, 0, 64, 2);
  Plan v = inter;
  v.schedule = "zb-v";
  StepCosts di, dv;
  estimate(m, c, w, inter, {}, nullptr, &di);
  estimate(m, c, w, v, {}, nullptr, &dv);
  double si = 0, sv = 0;
  for (size_t i = 0; i < 4; ++i) si += di.f[i], sv += dv.f[i];
  EXPECT_NEAR(si, sv, 1e-12 * si);
  const double moved = dv.f[0] - di.f[0];
  EXPECT_GT(moved, 0);
  EXPECT_NEAR(di.f[3] - dv.f[3], moved, 1e-9 * si);
  const auto mi = all_stage_memory(m, w, inter), mv = all_stage_memory(m, w, v);
  // The output matrix (vocab x hidden / tp, 16-bit weights) moves from the last rank to rank 0.
  const double out_bytes = 128256.0 * 4096 / 8 * 2;
  EXPECT_NEAR(mv[0].weights_bytes - mi[0].weights_bytes, out_bytes, 0.01 * out_bytes);
  EXPECT_NEAR(mi[3].weights_bytes - mv[3].weights_bytes, out_bytes, 0.01 * out_bytes);
}

// The cluster YAML: groups of {profile, nodes}, located errors.
TEST(Heterogeneous, ClusterYamlGroups) {
  const auto dir = std::filesystem::temp_directory_path() / "dtplan_hetero_test";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    auto path = (dir / name).string();
    std::ofstream(path) << text;
    return path;
  };
  const Cluster c = load_cluster(write("ok.yaml",
                                       "groups:\n  - profile: dgx-h100\n    nodes: 3\n"
                                       "  - profile: dgx-a100-80g\n    nodes: 1\n"),
                                 0);
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.num_gpus, 32);
  EXPECT_EQ(c.groups_used(), 2);
  EXPECT_EQ(c.group_first_rank(1), 24);
  EXPECT_EQ(c.profile.name, "dgx-h100");
  // --gpus 16: the first group's GPUs only, a homogeneous job.
  const Cluster part = load_cluster((dir / "ok.yaml").string(), 16);
  EXPECT_EQ(part.groups_used(), 1);
  auto error_of = [&](const std::string& name, const std::string& text) {
    try {
      load_cluster(write(name, text), 0);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string gpn = error_of("gpn.yaml",
                                   "groups:\n  - profile: dgx-h100\n    nodes: 2\n"
                                   "  - profile: gb200-nvl72\n    nodes: 2\n");
  EXPECT_NE(gpn.find("gpn.yaml:4:"), std::string::npos) << gpn;
  EXPECT_NE(gpn.find("same GPUs per node"), std::string::npos) << gpn;
  const std::string both = error_of("both.yaml",
                                    "profile: dgx-h100\nnodes: 2\ngroups:\n  - profile: dgx-h100\n"
                                    "    nodes: 1\n");
  EXPECT_NE(both.find("not both"), std::string::npos) << both;
  const std::string empty = error_of("empty.yaml", "groups: []\n");
  EXPECT_NE(empty.find("groups"), std::string::npos) << empty;
  const std::string key = error_of("key.yaml", "groups:\n  - profile: dgx-h100\n    node: 2\n");
  EXPECT_NE(key.find("key.yaml:3:"), std::string::npos) << key;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtplan
