// Invariants of the step cost model (issue #14) as properties over random valid plans of the
// zoo: they hold for any parameter values, so every model, profile, layout, ZeRO stage,
// recomputation, precision and schedule drawn is checked. Expected relations come from the
// definitions (an exposed part of a collective is a part of it; MFU counts fewer FLOPs than
// HFU; ZeRO-3 shards parameters over dp; ZeRO-2 reduces every micro-batch, ZeRO-1 once).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/catalog.h"
#include "simulator/analytic/estimator.h"
#include "simulator/des/step_sim.h"
#include "simulator/workload/op.h"

namespace dtplan {
namespace {

struct Draw {
  const ModelSpec* model;
  Cluster cluster;
  Workload work;
  Plan plan;
};

// Random plans that pass every validation (plan, schedule, hardware), drawn deterministically.
class PlanSource {
 public:
  PlanSource() : rng_(20261201) {
    for (const std::string& n : list_model_names()) models_.push_back(load_model(n));
    for (const std::string& n : list_profile_names())
      if (n != "cpu-host") profiles_.push_back(load_profile(n));
    schedules_ = schedule_names();
  }

  Draw next() {
    for (;;) {
      Draw d;
      d.model = &models_[pick(models_.size())];
      const ModelSpec& m = *d.model;
      Plan& p = d.plan;
      p.tp = one_of({1, 2, 4, 8});
      p.pp = one_of({1, 1, 2, 3, 4, 8, 16});
      p.cp = one_of({1, 1, 1, 2, 4});
      p.dp = one_of({1, 2, 4, 8, 16, 32});
      p.ep = m.moe ? one_of({1, 2, 4, 8}) : 1;
      p.sp = p.tp > 1 && pick(3) > 0;
      p.zero = static_cast<int>(pick(4));
      p.recompute = static_cast<Recompute>(pick(3));
      p.mbs = one_of({1, 1, 2, 4});
      p.schedule = schedules_[pick(schedules_.size())];
      p.vpp = one_of({1, 2, 3, 4});
      p.uneven_pp = pick(2) == 0;
      p.overlap_grad_reduce = pick(4) > 0;
      p.tp_comm_overlap = pick(4) == 0;
      p.ep_comm_overlap = pick(4) == 0;
      p.flash_attention = pick(5) > 0;
      p.main_grads_fp32 = pick(5) > 0;
      p.gbs = static_cast<int64_t>(p.mbs) * p.dp * one_of({1, 2, 4, 8, 16, 32, 64});
      d.work.seq_len = one_of({1024, 2048, 4096, 8192});
      d.work.global_batch = p.gbs;
      d.work.precision = std::array{Precision::kBf16, Precision::kFp16, Precision::kFp8}[pick(3)];
      d.cluster = Cluster{profiles_[pick(profiles_.size())], p.world(), {}, {}, {}};
      if (!validate_plan(m, p.world(), d.work, p).empty()) continue;
      if (!validate_schedule(p).empty()) continue;
      if (!validate_against_hardware(d.cluster.profile, d.work, p).empty()) continue;
      return d;
    }
  }

 private:
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  int one_of(std::initializer_list<int> v) { return *(v.begin() + pick(v.size())); }
  std::mt19937_64 rng_;
  std::vector<ModelSpec> models_;
  std::vector<HardwareProfile> profiles_;
  std::vector<std::string> schedules_;
};

constexpr int kPlans = 10000;

TEST(StepCostsProperty, InvariantsHoldOnRandomPlans) {
  PlanSource src;
  int failures = 0, zero2_pairs = 0, zero3_pairs = 0;
  auto fail = [&](const Draw& d, const std::string& what) {
    if (++failures <= 10)
      ADD_FAILURE() << what << ": " << d.model->name << " on " << d.cluster.profile.name << " "
                    << d.plan.describe() << " seq " << d.work.seq_len;
  };
  for (int k = 0; k < kPlans; ++k) {
    const Draw d = src.next();
    const ModelSpec& m = *d.model;
    const Estimate e = estimate(m, d.cluster, d.work, d.plan);
    for (int dim = 0; dim < kCommDims; ++dim)
      if (e.exposed_comm_s[dim] > e.comm_time_s[dim] * (1 + 1e-9) + 1e-12)
        fail(d, std::string("exposed > total in ") + kCommDimNames[dim]);
    if (!(e.mfu > 0 && e.mfu <= e.hfu * (1 + 1e-12) && e.hfu <= 1.0))
      fail(d, "not 0 < MFU <= HFU <= 1");
    // The simulator's per-stage memory (all_stage_memory) peaks where the estimate says.
    const std::vector<StageMemory> stages = all_stage_memory(m, d.work, d.plan);
    double peak = 0;
    for (const StageMemory& s : stages) peak = std::max(peak, s.total_bytes());
    if (std::abs(peak - e.memory_peak.total_bytes()) > 1e-9 * peak) fail(d, "memory differs");
    const int mb = d.plan.num_microbatches();
    const bool sharded = d.plan.dp * d.plan.cp > 1;
    if (sharded && mb > 1 && (d.plan.zero == 1 || d.plan.zero == 2)) {
      Plan z1 = d.plan, z2 = d.plan;
      z1.zero = 1;
      z2.zero = 2;
      const int dp = static_cast<int>(CommDim::kDP);
      if (estimate(m, d.cluster, d.work, z2).comm_volume_bytes[dp] <
          estimate(m, d.cluster, d.work, z1).comm_volume_bytes[dp])
        fail(d, "ZeRO-2 sends fewer DP bytes than ZeRO-1");
      ++zero2_pairs;
    }
    if (d.plan.zero == 3) {
      // Twice the data-parallel ranks (and batch): ZeRO-3's weights per GPU never grow.
      Plan q = d.plan;
      q.dp *= 2;
      q.gbs *= 2;
      Workload w = d.work;
      w.global_batch = q.gbs;
      const Cluster c{d.cluster.profile, q.world(), {}, {}, {}};
      if (validate_plan(m, q.world(), w, q).empty() && validate_schedule(q).empty()) {
        if (estimate(m, c, w, q).memory_peak.weights_bytes >
            e.memory_peak.weights_bytes * (1 + 1e-12))
          fail(d, "ZeRO-3 weights grow with dp");
        ++zero3_pairs;
      }
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(zero2_pairs, 100);
  EXPECT_GT(zero3_pairs, 100);
}

// With contention off the simulator replays the closed form's costs on a timeline; the closed
// form follows each schedule's own order (its formula where one is exact, the order's timeline
// otherwise, order_timing.h), so the two agree within 1% on every registered schedule, uneven
// splits included, measured per schedule on 10,000 random plans and printed.
TEST(StepCostsProperty, SimulatorAgreesWithTheClosedFormOnRandomPlans) {
  PlanSource src;
  struct Stats {
    int plans = 0, over_1pct = 0;
    double worst = 0;
    std::string worst_plan;
  };
  std::map<std::string, Stats> by_schedule;
  int checked = 0;
  while (checked < kPlans) {
    const Draw d = src.next();
    if (d.plan.pp > 1 && !des::simulator_supports(d.plan.schedule)) continue;
    if (d.cluster.num_gpus > 4096) continue;
    const des::StepSimResult r =
        des::simulate_step(*d.model, d.cluster, d.work, d.plan, /*link_sharing=*/false);
    const double rel = std::abs(r.estimate.step_time_s / r.analytic_step_s - 1);
    const bool uneven = d.plan.uneven_pp && d.model->layers % (d.plan.pp * d.plan.vpp) != 0;
    Stats& st =
        by_schedule[d.plan.pp > 1 ? d.plan.schedule + (uneven ? " uneven" : "") : "no pipeline"];
    ++st.plans;
    st.over_1pct += rel > 0.01;
    if (rel > st.worst) {
      st.worst = rel;
      st.worst_plan = d.model->name + " on " + d.cluster.profile.name + " " + d.plan.describe();
    }
    ++checked;
  }
  for (const auto& [name, st] : by_schedule)
    std::printf("%-12s %4d plans, %3d beyond 1%%, worst %.2f%% (%s)\n", name.c_str(), st.plans,
                st.over_1pct, 100 * st.worst, st.worst_plan.c_str());
  // Within 1% on every schedule. (Until 2026-12-02 the 1F1B and interleaved formulas timed
  // uneven splits, whose interior ranks are the slowest, 4 of 501 such plans beyond 1%, worst
  // 1.32%; 1F1B's formula now counts the round trip its warm-up and cool-down hide, and
  // interleaved times its order on an uneven split: 0 beyond 1%, worst 0.50%.)
  for (const auto& [name, st] : by_schedule)
    EXPECT_LE(st.worst, 0.01) << name << ": " << st.worst_plan;
  ASSERT_TRUE(by_schedule.count("no pipeline"));
  for (const std::string& s : schedule_names()) {
    if (!des::simulator_supports(s)) continue;
    EXPECT_TRUE(by_schedule.count(s)) << s << " never drawn";
  }
}

}  // namespace
}  // namespace dtplan
