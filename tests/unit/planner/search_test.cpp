// The search: deterministic ranking, pins, framework refusals, Pareto front, and agreement with
// an independent brute force over the same space.
#include "planner/search.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <tuple>

#include "core/catalog.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/memory_model.h"

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

// At an equal objective the plan with less peak memory ranks first: Llama 3.1 70B on 256 H100
// offloads different layer counts at the same step (the copies hide behind compute), and the
// one holding more memory ranked first (a new-user trial saw it on Mixtral 8x22B).
TEST(Search, EqualStepsRankByMemory) {
  const ModelSpec m = load_model("llama3.1-70b");
  const Cluster c = load_cluster("dgx-h100", 256);
  Workload w;
  w.seq_len = 8192;
  w.global_batch = 512;
  SearchOptions opt;
  opt.top_k = 300;
  const SearchResult r = search(m, c, w, {}, opt, AnalyticEvaluator());
  int ties = 0;
  for (size_t i = 1; i < r.top.size(); ++i)
    if (r.top[i - 1].objective == r.top[i].objective) {
      ++ties;
      EXPECT_LE(r.top[i - 1].estimate.memory_peak.total_bytes(),
                r.top[i].estimate.memory_peak.total_bytes())
          << r.top[i - 1].plan.describe() << " before " << r.top[i].plan.describe();
    }
  EXPECT_GT(ties, 0) << "no two ranked plans tie: the check above checked nothing";
}

// Sequence parallelism pinned on keeps TP groups only, a pinned schedule pipelines only (TP1 and
// PP1 plans were ranked with SP off and "1f1b" reported: a hostile-input trial).
TEST(Search, PinnedSpAndScheduleNeedTheirGroups) {
  Scenario s = gpt3(64);
  SearchOptions opt;
  opt.top_k = 64;
  SearchSpace space;
  space.sp = true;
  space.schedules = {"1f1b"};
  const SearchResult r = search(s.model, s.cluster, s.work, space, opt, AnalyticEvaluator());
  ASSERT_FALSE(r.top.empty());
  for (const Candidate& c : r.top) {
    EXPECT_GT(c.plan.tp, 1) << c.plan.describe();
    EXPECT_TRUE(c.plan.sp) << c.plan.describe();
    EXPECT_GT(c.plan.pp, 1) << c.plan.describe();
    EXPECT_EQ(c.plan.schedule, "1f1b") << c.plan.describe();
  }
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

// An independent brute force over the search's space as its contract states it (search.h,
// docs): every tp x pp x cp x dp of the GPUs (ep from the divisors of dp x cp x tp, etp 1 or tp
// for MoE); vpp 1-8 dividing the layers per stage (1 without PP); every registered schedule that
// runs vpp chunks (1F1B alone without PP); uneven stages without interleaving where the layers do
// not divide; SP with TP; ZeRO 0-3 (0 alone without dp x cp > 1); no, selective and full
// recomputation, full also of 1/4, 1/2 and 3/4 of each chunk's layers (4 or more); micro-batches
// 1-16 in powers of two dividing the batch per replica; every global batch. Each plan is checked
// with the validators, evaluated on its own (no cache) and kept when it fits; the top K are
// ordered by objective, then by the plan order search.h states; the Pareto front is the set no
// other fitting plan dominates.
struct Ranked {
  std::vector<std::string> top;  // describe(), best first
  std::vector<double> objective;
  std::vector<std::string> pareto;  // by time
};

auto order_key(const Plan& p) {
  return std::make_tuple(p.tp, p.pp, p.cp, p.dp, p.ep, p.etp, p.vpp, p.sp, p.zero,
                         static_cast<int>(p.recompute), p.recompute_layers, p.offload_layers, p.mbs,
                         p.gbs, p.schedule, p.uneven_pp);
}

Ranked brute_force(const ModelSpec& m, const Cluster& c, const Workload& w,
                   const std::vector<int64_t>& batches, const SearchOptions& opt) {
  const int n = c.num_gpus;
  const double budget = c.profile.gpu.memory_gib * units::kGiB * (1 - opt.memory_margin);
  const bool per_token = batches.size() > 1;
  struct Fit {
    Plan plan;
    double objective, t, mem;
  };
  std::vector<Fit> fits;
  auto divisors = [](int x) {
    std::vector<int> d;
    for (int i = 1; i <= x; ++i)
      if (x % i == 0) d.push_back(i);
    return d;
  };
  for (int tp : divisors(n))
    for (int pp : divisors(n / tp))
      for (int cp : divisors(n / (tp * pp))) {
        const int dp = n / (tp * pp * cp);
        std::vector<std::pair<int, int>> experts = {{1, 1}};
        if (m.moe) {
          experts.clear();
          for (int ep : divisors(dp * cp * tp))
            for (int etp : {1, tp})
              if (std::find(experts.begin(), experts.end(), std::make_pair(ep, etp)) ==
                  experts.end())
                experts.emplace_back(ep, etp);
        }
        for (auto [ep, etp] : experts)
          for (int vpp = 1; vpp <= 8; ++vpp) {
            if (vpp > 1 && (pp == 1 || m.layers % (pp * vpp) != 0)) continue;
            const std::vector<std::string> schedules =
                pp == 1 ? std::vector<std::string>{"1f1b"} : schedule_names();
            for (const std::string& sched : schedules)
              for (int zero = 0; zero <= 3; ++zero) {
                if (zero > 0 && dp * cp == 1) continue;
                const int chunk = std::max(1, m.layers / (pp * vpp));
                // (recomputation, layers recomputed, layers offloaded) per chunk; activation
                // offloading replaces recomputation, without pipeline parallelism, under
                // Megatron-Core's rules (transformer_config.py:1891-1899) and with a host link.
                std::vector<std::tuple<Recompute, int, int>> rcs = {{Recompute::kNone, 0, 0},
                                                                    {Recompute::kSelective, 0, 0},
                                                                    {Recompute::kFull, 0, 0}};
                const bool offload = pp == 1 && opt.framework_rules &&
                                     opt.framework == Framework::kMegatron &&
                                     c.profile.host.pcie_gbps_per_gpu > 0;
                if (chunk >= 4)
                  for (int part : {chunk / 4, chunk / 2, 3 * chunk / 4})
                    if (part > 0 && part < chunk) {
                      rcs.emplace_back(Recompute::kFull, part, 0);
                      if (offload) rcs.emplace_back(Recompute::kNone, 0, part);
                    }
                for (auto [rc, rc_layers, offload_layers] : rcs)
                  for (int64_t gbs : batches)
                    for (int mbs : {1, 2, 4, 8, 16}) {
                      if (gbs % dp != 0 || (gbs / dp) % mbs != 0) continue;
                      Plan p;
                      p.tp = tp;
                      p.pp = pp;
                      p.cp = cp;
                      p.dp = dp;
                      p.ep = ep;
                      p.etp = etp;
                      p.vpp = vpp;
                      p.sp = tp > 1;
                      p.zero = zero;
                      p.recompute = rc;
                      p.recompute_layers = rc_layers;
                      p.offload_layers = offload_layers;
                      p.mbs = mbs;
                      p.gbs = gbs;
                      p.schedule = sched;
                      p.uneven_pp = pp > 2 && m.layers % pp != 0 && vpp == 1;
                      Workload wg = w;
                      wg.global_batch = gbs;
                      if (tp > c.profile.node.nvlink_domain_gpus) continue;
                      if (framework_refusal(opt.framework, p, m)) continue;
                      if (!validate_plan(m, n, wg, p).empty() || !validate_schedule(p).empty() ||
                          !validate_against_hardware(c.profile, wg, p).empty())
                        continue;
                      // Offloaded activations must fit the node's host memory.
                      if (!host_memory_violation(m, wg, p, c.profile).empty()) continue;
                      const Estimate e = estimate(m, c, wg, p);
                      const double mem = e.memory_peak.total_bytes();
                      if (mem > budget) continue;
                      const double tokens = static_cast<double>(gbs) * w.seq_len;
                      fits.push_back({p, objective_value(e, opt.objective, c, tokens, per_token),
                                      e.step_time_s / (per_token ? tokens : 1.0), mem});
                    }
              }
          }
      }
  Ranked out;
  // The ranking: by the objective, at an equal one by peak memory, then the plan order.
  std::sort(fits.begin(), fits.end(), [](const Fit& a, const Fit& b) {
    if (a.objective != b.objective) return a.objective < b.objective;
    if (a.mem != b.mem) return a.mem < b.mem;
    return order_key(a.plan) < order_key(b.plan);
  });
  for (size_t i = 0; i < fits.size() && static_cast<int>(i) < opt.top_k; ++i) {
    out.top.push_back(fits[i].plan.describe());
    out.objective.push_back(fits[i].objective);
  }
  // q dominates f when q.t <= f.t, q.mem <= f.mem and (t, mem, plan order) puts q first: in
  // that order, f is on the front when every plan before it has more memory.
  std::sort(fits.begin(), fits.end(), [](const Fit& a, const Fit& b) {
    return std::make_tuple(a.t, a.mem, order_key(a.plan)) <
           std::make_tuple(b.t, b.mem, order_key(b.plan));
  });
  double least = std::numeric_limits<double>::infinity();
  for (const Fit& f : fits) {
    if (f.mem < least) out.pareto.push_back(f.plan.describe());
    least = std::min(least, f.mem);
  }
  return out;
}

Ranked ranked(const SearchResult& r) {
  Ranked out;
  for (const auto& c : r.top) {
    out.top.push_back(c.plan.describe());
    out.objective.push_back(c.objective);
  }
  for (const auto& c : r.pareto) out.pareto.push_back(c.plan.describe());
  return out;
}

void expect_same_ranking(const Ranked& a, const Ranked& b, const std::string& what) {
  EXPECT_EQ(a.top, b.top) << what;
  EXPECT_EQ(a.objective, b.objective) << what;
  EXPECT_EQ(std::set<std::string>(a.pareto.begin(), a.pareto.end()),
            std::set<std::string>(b.pareto.begin(), b.pareto.end()))
      << what;
  EXPECT_EQ(a.pareto.size(), b.pareto.size()) << what;
}

TEST(Search, AgreesWithBruteForce) {
  struct Case {
    const char* model;
    const char* profile;
    int gpus;
    int64_t seq;
    std::vector<int64_t> batches;
    Objective objective;
    Framework framework;
    double host_gib = 0;  // the profile's host memory when 0
  };
  const std::vector<Case> cases = {
      {"llama3-8b", "dgx-h100", 16, 4096, {64}, Objective::kStepTime, Framework::kMegatron},
      // 60 GiB of host memory: 8 offloaded layers at mbs 2 (8 GPUs x 8 x ~1.06 GiB = 68 GiB)
      // no longer fit it, at mbs 1 (34 GiB) they do.
      {"llama3-8b", "dgx-h100", 16, 4096, {64}, Objective::kStepTime, Framework::kMegatron, 60},
      {"llama3-8b", "dgx-h100", 16, 4096, {64}, Objective::kMemory, Framework::kTorchtitan},
      {"llama3-8b", "dgx-h100", 16, 4096, {24, 32, 64}, Objective::kStepTime, Framework::kMegatron},
      {"llama3-8b", "dgx-h100", 16, 4096, {32, 48}, Objective::kMfu, Framework::kTorchtitan},
      {"mixtral-8x7b", "dgx-h100", 16, 4096, {64}, Objective::kCost, Framework::kMegatron},
  };
  for (const Case& k : cases) {
    const ModelSpec m = load_model(k.model);
    Cluster c = load_cluster(k.profile, k.gpus);
    if (k.host_gib > 0) c.profile.host.memory_gib = k.host_gib;
    Workload w;
    w.seq_len = k.seq;
    w.global_batch = k.batches.back();
    SearchOptions opt;
    opt.top_k = 8;
    opt.objective = k.objective;
    opt.framework = k.framework;
    opt.threads = 2;
    SearchSpace space;
    space.gbs = k.batches;
    const std::string what = fmt::format("{} on {} GPUs, {} batches, objective {}", k.model, k.gpus,
                                         k.batches.size(), static_cast<int>(k.objective));
    const SearchResult r = search(m, c, w, space, opt, AnalyticEvaluator{});
    ASSERT_EQ(r.top.size(), 8u) << what;
    EXPECT_EQ(r.per_token, k.batches.size() > 1) << what;
    expect_same_ranking(ranked(r), brute_force(m, c, w, k.batches, opt), what);
    if (k.host_gib > 0) {
      // The limit matters: with the profile's host memory the top holds offload plans that
      // 60 GiB refuses; with 60 GiB none of the ranked plans exceeds it.
      const SearchResult roomy =
          search(m, load_cluster(k.profile, k.gpus), w, space, opt, AnalyticEvaluator{});
      bool refused = false;
      for (const Candidate& cand : roomy.top)
        refused |= !host_memory_violation(m, w, cand.plan, c.profile).empty();
      EXPECT_TRUE(refused) << what;
      for (const Candidate& cand : r.top)
        EXPECT_TRUE(host_memory_violation(m, w, cand.plan, c.profile).empty()) << what;
    }
  }
}

// Pruning skips plans but never changes the ranking or the front: the same on several spaces,
// objectives, global-batch sets and thread counts; every plan that fits is either ranked or
// counted as pruned, and pruning happens.
TEST(Search, PruningChangesNothing) {
  struct Case {
    const char* model;
    const char* profile;
    int gpus;
    std::vector<int64_t> batches;
  };
  // A batch range (every batch from 64 to 256): the search decides whole ranges of a plan's
  // batches at once from its micro-batch floor and its smallest batch's memory.
  std::vector<int64_t> range;
  for (int64_t g = 64; g <= 256; ++g) range.push_back(g);
  const std::vector<Case> cases = {{"gpt3-175b", "dgx-a100-80g", 128, {512}},
                                   {"llama3-70b", "dgx-h100", 64, {128, 256, 384}},
                                   {"mixtral-8x7b", "dgx-h100", 32, {256}},
                                   {"megatron-1t", "dgx-a100-80g", 384, {384}},
                                   {"llama3-8b", "dgx-h100", 32, range}};
  long pruned_total = 0;
  for (const Case& k : cases)
    for (Objective obj :
         {Objective::kStepTime, Objective::kCost, Objective::kMfu, Objective::kMemory})
      for (int threads : {1, 3}) {
        const ModelSpec m = load_model(k.model);
        const Cluster c = load_cluster(k.profile, k.gpus);
        Workload w;
        w.global_batch = k.batches.back();
        SearchSpace space;
        space.gbs = k.batches;
        SearchOptions opt;
        opt.top_k = 5;
        opt.objective = obj;
        opt.threads = threads;
        opt.prune = false;
        const SearchResult full = search(m, c, w, space, opt, AnalyticEvaluator{});
        opt.prune = true;
        const SearchResult pruned = search(m, c, w, space, opt, AnalyticEvaluator{});
        const std::string what =
            fmt::format("{} objective {} threads {}", k.model, static_cast<int>(obj), threads);
        expect_same_ranking(ranked(pruned), ranked(full), what);
        const long skipped = pruned.rejected[static_cast<size_t>(Rejection::kCannotBeatTopK)];
        EXPECT_EQ(full.rejected[static_cast<size_t>(Rejection::kCannotBeatTopK)], 0) << what;
        EXPECT_EQ(pruned.feasible + skipped, full.feasible) << what;
        EXPECT_EQ(pruned.enumerated, full.enumerated) << what;
        for (int r = 0; r < kNumRejections; ++r)
          if (r != static_cast<int>(Rejection::kCannotBeatTopK)) {
            EXPECT_EQ(pruned.rejected[static_cast<size_t>(r)],
                      full.rejected[static_cast<size_t>(r)])
                << what << " reason " << r;
          }
        pruned_total += skipped;
      }
  EXPECT_GT(pruned_total, 0);
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

// search --refine K with K in the hundreds runs the simulations on the search's threads; the
// result must equal evaluating the same plans one by one (and not depend on the thread count).
TEST(Search, RefineOfHundredsOnTwoThreadsEqualsOneByOne) {
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80g", 256);
  Workload w;
  w.seq_len = 2048;
  w.global_batch = 512;
  SearchOptions opt;
  opt.top_k = 240;
  opt.threads = 2;
  SearchSpace space;
  space.schedules = {"1f1b", "interleaved"};
  SearchResult r = search(m, c, w, space, opt, AnalyticEvaluator{});
  ASSERT_EQ(r.top.size(), 240u);
  const std::vector<Candidate> before = r.top;
  refine_top(r, m, c, w, opt, DesEvaluator{}, 200);
  DesEvaluator des;
  std::vector<std::string> refined, was;
  for (size_t i = 0; i < 200; ++i) {
    EXPECT_TRUE(r.top[i].refined);
    EXPECT_EQ(r.top[i].estimate.step_time_s, des.evaluate(m, c, w, r.top[i].plan).step_time_s);
    if (i > 0) {
      EXPECT_LE(r.top[i - 1].objective, r.top[i].objective);
    }
    refined.push_back(r.top[i].plan.describe());
    was.push_back(before[i].plan.describe());
  }
  std::sort(refined.begin(), refined.end());
  std::sort(was.begin(), was.end());
  EXPECT_EQ(refined, was);
  for (size_t i = 200; i < 240; ++i) {
    EXPECT_FALSE(r.top[i].refined);
    EXPECT_EQ(r.top[i].plan.describe(), before[i].plan.describe());
  }
  // One thread: the same ranking.
  SearchResult one;
  one.top = before;
  opt.threads = 1;
  refine_top(one, m, c, w, opt, DesEvaluator{}, 200);
  for (size_t i = 0; i < 240; ++i)
    EXPECT_EQ(one.top[i].plan.describe(), r.top[i].plan.describe()) << i;
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// Llama 3 405B's 126 layers on 16 stages (Llama 3 paper §3.3.2, Table 4: TP8 PP16 on 16K H100,
// interleaved, one layer fewer on the first and last stages): 126 does not divide by 16 x v,
// 126 + 2 (the embedding and the loss counted as layers) does for v = 2, 4, 8. The search takes
// those interleaved plans, each with both account-for flags, and its plans of v = 1 the uneven
// split; the estimate of each equals a direct estimate of the plan.
TEST(Search, InterleavesLayersThatDoNotDivideWithTheEmbeddingAndLossCounted) {
  Scenario s{load_model("llama3.1-405b"), load_cluster("dgx-h100", 16384), {}};
  s.work.seq_len = 8192;
  s.work.global_batch = 2048;
  SearchSpace space;
  space.tp = {8};
  space.pp = {16};
  space.cp = {1};
  AnalyticEvaluator ev;
  SearchOptions opt;
  opt.top_k = 50;
  const SearchResult r = search(s.model, s.cluster, s.work, space, opt, ev);
  ASSERT_FALSE(r.top.empty());
  std::set<int> counted_vpps;
  for (const Candidate& c : r.top) {
    if (c.plan.vpp > 1) {
      EXPECT_TRUE(c.plan.account_for_embedding && c.plan.account_for_loss) << c.plan.describe();
      EXPECT_EQ((126 + 2) % (16 * c.plan.vpp), 0) << c.plan.describe();
      counted_vpps.insert(c.plan.vpp);
    } else {
      EXPECT_TRUE(c.plan.uneven_pp) << c.plan.describe();
    }
    EXPECT_DOUBLE_EQ(c.estimate.step_time_s,
                     estimate(s.model, s.cluster, s.work, c.plan).step_time_s);
  }
  EXPECT_FALSE(counted_vpps.empty());
  EXPECT_GT(r.top.front().plan.vpp, 1) << r.top.front().plan.describe();
}

}  // namespace
}  // namespace dtplan

#include "planner/deadline.h"

namespace dtplan {
namespace {

// The deadline inversion against a brute-force loop over every node count: the fewest GPUs
// whose best plan trains the tokens in time.
TEST(Deadline, FewestGpusAgreeWithABruteForceLoopOverNodeCounts) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster base = load_cluster("dgx-h100", 8);
  Workload w;
  w.seq_len = 8192;
  w.global_batch = 512;
  w.train_tokens = 2e11;
  AnalyticEvaluator ev;
  SearchOptions opt;
  for (double deadline_days : {10.0, 3.0, 1.5}) {
    const DeadlineAnswer a = fewest_gpus_for_deadline(m, base, w, {}, opt, ev, deadline_days, 512);
    int brute = 0;
    Candidate brute_best;
    for (int g = 8; g <= 512 && brute == 0; g += 8) {
      Cluster c = base;
      c.num_gpus = g;
      SearchOptions o = opt;
      o.top_k = 1;
      const SearchResult r = search(m, c, w, {}, o, ev);
      if (r.top.empty()) continue;
      if (w.train_tokens / r.top.front().estimate.tokens_per_s / 86400 <= deadline_days)
        brute = g, brute_best = r.top.front();
    }
    ASSERT_NE(brute, 0) << deadline_days;
    EXPECT_TRUE(a.found) << deadline_days;
    EXPECT_TRUE(a.exhaustive) << deadline_days;
    EXPECT_EQ(a.gpus, brute) << deadline_days;
    EXPECT_EQ(a.best.plan.describe(), brute_best.plan.describe()) << deadline_days;
    EXPECT_LE(a.days, deadline_days);
    EXPECT_NEAR(a.gpu_hours, a.gpus * a.days * 24, 1e-6 * a.gpu_hours);
    EXPECT_GE(a.gpus, a.peak_bound_gpus);
  }
  // Beyond reach: not found, with the fastest seen.
  const DeadlineAnswer never = fewest_gpus_for_deadline(m, base, w, {}, opt, ev, 0.01, 64);
  EXPECT_FALSE(never.found);
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// --distinct: the best plan of each (tp, pp, cp, ep, zero, recompute) first, in rank order, then
// the near-duplicates in rank order; nothing lost or repeated within k.
TEST(Search, DistinctLayoutsComeFirst) {
  Scenario s{load_model("llama3-70b"), load_cluster("dgx-h100", 256), {}};
  s.work.seq_len = 8192;
  s.work.global_batch = 512;
  AnalyticEvaluator ev;
  SearchOptions opt;
  opt.top_k = 80;
  const SearchResult plain = search(s.model, s.cluster, s.work, {}, opt, ev);
  SearchResult r = plain;
  distinct_layouts_first(r, 10);
  ASSERT_EQ(r.top.size(), 10u);
  auto key = [](const Plan& p) {
    return std::tuple(p.tp, p.pp, p.cp, p.ep, p.zero, static_cast<int>(p.recompute));
  };
  std::set<decltype(key(Plan{}))> keys;
  for (const Candidate& c : r.top)
    EXPECT_TRUE(keys.insert(key(c.plan)).second) << c.plan.describe();
  // The same plans as the first occurrence of each key in the plain ranking, in its order.
  std::vector<std::string> want;
  std::set<decltype(key(Plan{}))> seen;
  for (const Candidate& c : plain.top)
    if (seen.insert(key(c.plan)).second && want.size() < 10) want.push_back(c.plan.describe());
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(r.top[i].plan.describe(), want[i]) << i;
  EXPECT_EQ(r.top.front().plan.describe(), plain.top.front().plan.describe());
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// The budget inversion against a brute-force loop over every node count: the fastest training
// whose GPU-hours stay within the budget.
TEST(Deadline, FastestWithinABudgetAgreesWithABruteForceLoop) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster base = load_cluster("dgx-h100", 8);
  Workload w;
  w.seq_len = 8192;
  w.global_batch = 512;
  w.train_tokens = 2e11;
  AnalyticEvaluator ev;
  SearchOptions opt;
  for (double budget : {5500.0, 6000.0, 8000.0}) {  // the cheapest run takes ~5400
    const BudgetAnswer a = fastest_within_budget(m, base, w, {}, opt, ev, budget, 512);
    double brute_days = 1e300;
    int brute = 0;
    for (int g = 8; g <= 512; g += 8) {
      Cluster c = base;
      c.num_gpus = g;
      SearchOptions o = opt;
      o.top_k = 1;
      const SearchResult r = search(m, c, w, {}, o, ev);
      if (r.top.empty()) continue;
      const double days = w.train_tokens / r.top.front().estimate.tokens_per_s / 86400;
      if (g * days * 24 <= budget && days < brute_days) brute_days = days, brute = g;
    }
    ASSERT_NE(brute, 0) << budget;
    EXPECT_TRUE(a.found && a.exhaustive) << budget;
    EXPECT_EQ(a.gpus, brute) << budget;
    EXPECT_NEAR(a.days, brute_days, 1e-9 * brute_days) << budget;
    EXPECT_LE(a.gpu_hours, budget);
  }
  // Below the 100%-MFU bound nothing can.
  EXPECT_FALSE(fastest_within_budget(m, base, w, {}, opt, ev, 10.0, 512).found);
}

// The analytic estimate, twice as fast on one GPU count: GPU-hours that fall where a count
// suits the layout (the way a real count that divides the batch can).
class FastOn final : public IEvaluator {
 public:
  explicit FastOn(int gpus) : gpus_(gpus) {}
  const char* name() const override { return "fast-on"; }
  Estimate evaluate(const ModelSpec& m, const Cluster& c, const Workload& w,
                    const Plan& p) const override {
    Estimate e = base_.evaluate(m, c, w, p);
    if (c.num_gpus == gpus_) {
      e.step_time_s /= 2;
      e.tokens_per_s *= 2;
    }
    return e;
  }

 private:
  AnalyticEvaluator base_;
  int gpus_;
};

// Beyond 256 node counts the budget search probes a ladder; a count past the first one over the
// budget that trains within it, and faster, is found (the search stopped at the first count over
// the budget: GPT-3 175B answered 12,288 GPUs where 24,576 was within and 33% faster).
TEST(Deadline, FastestWithinABudgetLooksPastTheFirstCountOverIt) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster base = load_cluster("dgx-h100", 8);
  Workload w;
  w.seq_len = 8192;
  w.global_batch = 512;
  w.train_tokens = 2e11;
  AnalyticEvaluator plain;
  SearchOptions opt;
  auto gpu_hours = [&](int g) {
    Cluster c = base;
    c.num_gpus = g;
    SearchOptions o = opt;
    o.top_k = 1;
    const SearchResult r = search(m, c, w, {}, o, plain);
    return r.top.empty() ? 1e300 : g * w.train_tokens / r.top.front().estimate.tokens_per_s / 3600;
  };
  const double budget = gpu_hours(3072) / 2 * 1.01;
  ASSERT_GT(gpu_hours(2048), budget);  // the doubling ladder's 2048 is over it
  const BudgetAnswer a = fastest_within_budget(m, base, w, {}, opt, FastOn(3072), budget, 4096);
  ASSERT_TRUE(a.found);
  EXPECT_EQ(a.gpus, 3072);
  EXPECT_LE(a.gpu_hours, budget);
  EXPECT_FALSE(a.exhaustive);
}

}  // namespace
}  // namespace dtplan
