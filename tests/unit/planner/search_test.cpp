// The search: deterministic ranking, pins, framework refusals, Pareto front, and agreement with
// an independent brute force over the same space.
#include "planner/search.h"

#include <gtest/gtest.h>

#include "core/catalog.h"
#include "simulator/analytic/estimator.h"

namespace dtplan {
namespace {

struct Scenario {
  ModelSpec model;
  Cluster cluster;
  Workload work;
};

Scenario gpt3(int gpus) {
  Scenario s{load_model("gpt3-175b"), load_cluster("dgx-a100-80g", gpus), {}};
  s.work.seq_len = 2048;
  s.work.global_batch = 1536;
  return s;
}

TEST(Search, SameRankingWhateverTheThreadCount) {
  Scenario s = gpt3(256);
  AnalyticEvaluator ev;
  SearchOptions opt;
  opt.top_k = 15;
  opt.threads = 1;
  SearchResult one = search(s.model, s.cluster, s.work, {}, opt, ev);
  for (int t : {2, 3, 5}) {
    opt.threads = t;
    SearchResult many = search(s.model, s.cluster, s.work, {}, opt, ev);
    ASSERT_EQ(one.top.size(), many.top.size());
    for (size_t i = 0; i < one.top.size(); ++i) {
      EXPECT_EQ(one.top[i].plan.describe(), many.top[i].plan.describe()) << "threads " << t;
      EXPECT_DOUBLE_EQ(one.top[i].estimate.step_time_s, many.top[i].estimate.step_time_s);
    }
    ASSERT_EQ(one.pareto.size(), many.pareto.size());
    EXPECT_EQ(one.enumerated, many.enumerated);
  }
}

TEST(Search, RankedFittingAndParetoNonDominated) {
  Scenario s = gpt3(256);
  AnalyticEvaluator ev;
  SearchOptions opt;
  SearchResult r = search(s.model, s.cluster, s.work, {}, opt, ev);
  ASSERT_FALSE(r.top.empty());
  const double budget = s.cluster.profile.gpu.memory_gib * units::kGiB * (1 - opt.memory_margin);
  for (size_t i = 0; i < r.top.size(); ++i) {
    EXPECT_LE(r.top[i].estimate.memory_peak.total_bytes(), budget);
    if (i > 0) {
      EXPECT_LE(r.top[i - 1].objective, r.top[i].objective);
    }
  }
  for (size_t i = 1; i < r.pareto.size(); ++i) {
    EXPECT_LT(r.pareto[i - 1].estimate.step_time_s, r.pareto[i].estimate.step_time_s);
    EXPECT_GT(r.pareto[i - 1].estimate.memory_peak.total_bytes(),
              r.pareto[i].estimate.memory_peak.total_bytes());
  }
  long rejected = 0;
  for (long n : r.rejected) rejected += n;
  EXPECT_EQ(rejected + r.feasible, r.enumerated) << "every enumerated plan is ranked or rejected";
}

TEST(Search, PinsAndFrameworkRefusals) {
  Scenario s = gpt3(256);
  AnalyticEvaluator ev;
  SearchSpace space;
  space.tp = {8};
  space.pp = {4, 8, 16};
  SearchOptions opt;
  opt.framework = Framework::kDeepSpeed;
  SearchResult r = search(s.model, s.cluster, s.work, space, opt, ev);
  ASSERT_FALSE(r.top.empty());
  for (const auto& c : r.top) {
    EXPECT_EQ(c.plan.tp, 8);
    EXPECT_TRUE(c.plan.pp == 4 || c.plan.pp == 8 || c.plan.pp == 16);
    EXPECT_FALSE(c.plan.zero >= 2 && c.plan.pp > 1) << c.plan.describe();
    EXPECT_EQ(c.plan.schedule, "1f1b");
  }
  EXPECT_GT(r.rejected[static_cast<size_t>(Rejection::kFramework)], 0);
}

// Independent brute force: every plan of the same space, evaluated directly.
TEST(Search, AgreesWithBruteForce) {
  Scenario s{load_model("llama3-8b"), load_cluster("dgx-h100", 16), {}};
  s.work.seq_len = 4096;
  s.work.global_batch = 64;
  AnalyticEvaluator ev;
  SearchOptions opt;
  opt.top_k = 1;
  SearchSpace space;
  space.schedules = {"1f1b", "interleaved"};
  SearchResult r = search(s.model, s.cluster, s.work, space, opt, ev);
  ASSERT_EQ(r.top.size(), 1u);
  const double budget = s.cluster.profile.gpu.memory_gib * units::kGiB * 0.9;
  double best = 1e300;
  for (int tp : {1, 2, 4, 8})
    for (int pp : {1, 2, 4, 8, 16}) {
      if (16 % (tp * pp)) continue;
      const int dp = 16 / (tp * pp);
      for (int vpp : {1, 2, 4, 8})
        for (int zero = 0; zero <= 3; ++zero)
          for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
            for (int mbs : {1, 2, 4, 8, 16}) {
              Plan p;
              p.tp = tp;
              p.pp = pp;
              p.dp = dp;
              p.vpp = pp > 1 ? vpp : 1;
              if (pp == 1 && vpp > 1) continue;
              p.sp = tp > 1;
              p.zero = dp > 1 ? zero : 0;
              if (dp == 1 && zero > 0) continue;
              p.recompute = rc;
              p.mbs = mbs;
              p.gbs = 64;
              p.schedule = p.vpp > 1 ? "interleaved" : "1f1b";
              if (framework_refusal(Framework::kMegatron, p)) continue;
              if (!validate_plan(s.model, 16, s.work, p).empty()) continue;
              if (!validate_schedule(p).empty()) continue;
              Estimate e = estimate(s.model, s.cluster, s.work, p);
              if (e.memory_peak.total_bytes() > budget) continue;
              best = std::min(best, e.step_time_s);
            }
    }
  EXPECT_DOUBLE_EQ(r.top[0].estimate.step_time_s, best) << r.top[0].plan.describe();
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

TEST(Search, RefineReRanksTheTopWithTheSimulator) {
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80g", 256);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 512;
  SearchOptions opt;
  opt.top_k = 6;
  SearchSpace space;
  space.schedules = {"1f1b", "interleaved"};
  SearchResult r = search(m, c, w, space, opt, AnalyticEvaluator{});
  ASSERT_EQ(r.top.size(), 6u);
  std::vector<std::string> before;
  for (const auto& cand : r.top) before.push_back(cand.plan.describe());
  refine_top(r, m, c, w, opt, DesEvaluator{}, 4);
  DesEvaluator des;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(r.top[i].estimate.step_time_s,
                     des.evaluate(m, c, w, r.top[i].plan).step_time_s);
    if (i > 0) {
      EXPECT_LE(r.top[i - 1].objective, r.top[i].objective);
    }
  }
  // The same four plans, possibly reordered; the rest untouched.
  std::vector<std::string> first4;
  for (size_t i = 0; i < 4; ++i) first4.push_back(r.top[i].plan.describe());
  std::sort(first4.begin(), first4.end());
  std::vector<std::string> was(before.begin(), before.begin() + 4);
  std::sort(was.begin(), was.end());
  EXPECT_EQ(first4, was);
  EXPECT_EQ(r.top[4].plan.describe(), before[4]);
}

}  // namespace
}  // namespace dtplan
