#include "planner/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <tuple>

#include "simulator/analytic/estimator.h"
#include "simulator/cost/memory_model.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {

const std::vector<std::string>& objective_names() {
  static const std::vector<std::string> names = {"step_time", "cost", "mfu", "memory"};
  return names;
}

const char* describe(Rejection r) {
  switch (r) {
    case Rejection::kWorldSize:
      return "tp*pp*cp does not divide the GPU count";
    case Rejection::kDivisibility:
      return "heads, layers, experts, batch or sequence not divisible";
    case Rejection::kCrossNodeTp:
      return "tensor parallelism crosses nodes (--allow-cross-node-tp)";
    case Rejection::kFramework:
      return "the framework cannot express it (--framework)";
    case Rejection::kMemoryStates:
      return "weights + gradients + optimizer alone exceed memory";
    case Rejection::kMemory:
      return "does not fit in memory (with activations)";
    case Rejection::kCannotBeatTopK:
      return "cannot beat the current top K (bound)";
    case Rejection::kInvalid:
      return "other validation failure";
  }
  return "?";
}

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

bool allowed(const std::vector<int>& pin, int v) {
  return pin.empty() || std::find(pin.begin(), pin.end(), v) != pin.end();
}

// A total order on plans, for deterministic ties.
auto plan_key(const Plan& p) {
  return std::make_tuple(p.tp, p.pp, p.cp, p.dp, p.ep, p.etp, p.vpp, p.sp, p.zero,
                         static_cast<int>(p.recompute), p.recompute_layers, p.mbs, p.schedule,
                         p.uneven_pp);
}

bool better(const Candidate& a, const Candidate& b) {
  if (a.objective != b.objective) return a.objective < b.objective;
  return plan_key(a.plan) < plan_key(b.plan);
}

struct Layout {
  int tp, pp, cp, dp, ep, etp;
};

struct Worker {
  std::vector<Candidate> top;
  std::vector<Candidate> pareto;
  std::array<long, kNumRejections> rejected{};
  std::array<std::string, kNumRejections> example{};
  long enumerated = 0, evaluated = 0, feasible = 0;

  // `why` is formatted only for the first plan rejected for a reason (an example to show).
  template <typename Why>
  void reject(Rejection r, long n, Why&& why) {
    rejected[static_cast<size_t>(r)] += n;
    if (example[static_cast<size_t>(r)].empty()) example[static_cast<size_t>(r)] = why();
  }
  void offer(const Candidate& c, int k) {
    if (static_cast<int>(top.size()) < k || better(c, top.back())) {
      top.insert(std::upper_bound(top.begin(), top.end(), c, better), c);
      if (static_cast<int>(top.size()) > k) top.pop_back();
    }
    const double t = c.estimate.step_time_s, mem = c.estimate.memory_peak.total_bytes();
    for (const Candidate& q : pareto)
      if (q.estimate.step_time_s <= t && q.estimate.memory_peak.total_bytes() <= mem) return;
    pareto.erase(std::remove_if(pareto.begin(), pareto.end(),
                                [&](const Candidate& q) {
                                  return t <= q.estimate.step_time_s &&
                                         mem <= q.estimate.memory_peak.total_bytes();
                                }),
                 pareto.end());
    pareto.push_back(c);
  }
};

double objective_of(const Estimate& e, Objective o, const Cluster& c) {
  switch (o) {
    case Objective::kStepTime:
      return e.step_time_s;
    case Objective::kCost: {
      const double price = c.profile.usd_per_gpu_hour.value_or(1.0);  // GPU-hours when unpriced
      return e.step_time_s * c.num_gpus * price / 3600.0;
    }
    case Objective::kMfu:
      return -e.mfu;
    case Objective::kMemory:
      return e.memory_peak.total_bytes();
  }
  return e.step_time_s;
}

}  // namespace

SearchResult search(const ModelSpec& m, const Cluster& c, const Workload& w,
                    const SearchSpace& space, const SearchOptions& opt,
                    const IEvaluator& evaluator) {
  const auto start = std::chrono::steady_clock::now();
  const int n = c.num_gpus;
  const int domain = std::max(1, c.profile.node.nvlink_domain_gpus);
  const double budget = c.profile.gpu.memory_gib * units::kGiB * (1.0 - opt.memory_margin);
  SearchResult result;

  // Outer layouts: tp x pp x cp x dp (x ep x etp for MoE), enumerated up front.
  std::vector<Layout> layouts;
  Worker pre;  // rejections found while enumerating layouts
  for (int tp : divisors(n)) {
    if (!allowed(space.tp, tp)) continue;
    for (int pp : divisors(n / tp)) {
      if (!allowed(space.pp, pp)) continue;
      for (int cp : divisors(n / (tp * pp))) {
        if (!allowed(space.cp, cp)) continue;
        const int dp = n / (tp * pp * cp);
        std::vector<std::pair<int, int>> experts = {{1, 1}};
        if (m.moe) {
          experts.clear();
          for (int ep : divisors(dp * cp * tp))
            for (int etp : {1, tp}) {
              if (!allowed(space.ep, ep) || !allowed(space.etp, etp)) continue;
              if (std::find(experts.begin(), experts.end(), std::make_pair(ep, etp)) ==
                  experts.end())
                experts.emplace_back(ep, etp);
            }
        }
        for (auto [ep, etp] : experts) layouts.push_back({tp, pp, cp, dp, ep, etp});
      }
    }
  }

  const std::vector<Recompute> recomputes =
      space.recompute.empty()
          ? std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull}
          : space.recompute;
  const std::vector<int> zeros = space.zero.empty() ? std::vector<int>{0, 1, 2, 3} : space.zero;

  const std::vector<std::string> all_schedules = schedule_names();
  auto run_layout = [&](const Layout& L, Worker& wk) {
    // Inner values for this layout.
    std::vector<int> vpps = {1};
    if (L.pp > 1)
      for (int v = 2; v <= 8; ++v)
        if (m.layers % (L.pp * v) == 0) vpps.push_back(v);
    if (!space.vpp.empty()) {
      std::vector<int> keep;
      for (int v : vpps)
        if (allowed(space.vpp, v)) keep.push_back(v);
      vpps = keep;
    }
    std::vector<int> mbss;
    const int64_t per_replica = w.global_batch / L.dp;
    for (int b = 1; b <= opt.max_mbs; b *= 2)
      if (w.global_batch % L.dp == 0 && per_replica % b == 0 && allowed(space.mbs, b))
        mbss.push_back(b);
    for (int b : space.mbs)
      if (b > opt.max_mbs && w.global_batch % L.dp == 0 && per_replica % b == 0) mbss.push_back(b);
    const bool sp = space.sp.value_or(L.tp > 1) && L.tp > 1;

    // Uneven stages where the layers do not divide (Megatron: fewer layers on the first and
    // last stages), only without interleaving.
    const bool uneven = L.pp > 2 && m.layers % L.pp != 0;
    for (int zero : zeros) {
      if (zero > 0 && L.dp * L.cp == 1) continue;  // nothing to shard over: same as zero 0
      for (int vpp : vpps) {
        std::vector<std::string> schedules;
        if (L.pp == 1) {
          if (vpp > 1) continue;
          schedules = {"1f1b"};
        } else {
          for (const auto& s : space.schedules.empty() ? all_schedules : space.schedules) {
            const IPipelineSchedule* sch = find_schedule(s);
            if (sch && sch->accepts_chunks(vpp)) schedules.push_back(s);
          }
        }
        const long inner = static_cast<long>(recomputes.size() * mbss.size() * schedules.size());
        wk.enumerated += inner;
        if (inner == 0) continue;

        Plan p;
        p.tp = L.tp;
        p.pp = L.pp;
        p.cp = L.cp;
        p.dp = L.dp;
        p.ep = L.ep;
        p.etp = L.etp;
        p.vpp = vpp;
        p.sp = sp;
        p.zero = zero;
        p.gbs = w.global_batch;
        p.uneven_pp = uneven && vpp == 1;
        p.mbs = mbss.front();
        p.schedule = schedules.front();
        // Checks that hold for the whole sub-space.
        if (L.tp > domain && !opt.allow_cross_node_tp) {
          wk.reject(Rejection::kCrossNodeTp, inner,
                    [&] { return fmt::format("TP{} > {} GPUs per NVLink domain", L.tp, domain); });
          continue;
        }
        auto v = validate_plan(m, n, w, p);
        if (!v.empty()) {
          const bool div = v.front().flag != "--zero" && v.front().flag != "--precision";
          wk.reject(div ? Rejection::kDivisibility : Rejection::kInvalid, inner, [&] {
            return fmt::format("{} {}: {}", p.describe(), v.front().flag, v.front().reason);
          });
          continue;
        }
        // Memory lower bound: parameter states of the most loaded stage.
        {
          const IPipelineSchedule* s1 = find_schedule(p.pp > 1 ? p.schedule : "1f1b");
          double states = 0;
          for (int rank : {0, p.pp - 1}) {
            Plan q = p;
            q.recompute = Recompute::kFull;
            StageMemory sm = stage_memory(m, w, q, *s1, rank);
            states = std::max(states, sm.weights_bytes + sm.grads_bytes + sm.optimizer_bytes);
          }
          if (states > budget) {
            wk.reject(Rejection::kMemoryStates, inner, [&] {
              return fmt::format("{}: {:.1f} GiB of states > {:.1f} GiB", p.describe(),
                                 states / units::kGiB, budget / units::kGiB);
            });
            continue;
          }
        }
        // Full recomputation of all layers, or of a share of each chunk's layers (partial).
        const int chunk_layers = std::max(1, m.layers / (L.pp * vpp));
        std::vector<std::pair<Recompute, int>> rcs;
        for (Recompute rc : recomputes) {
          rcs.emplace_back(rc, 0);
          if (rc == Recompute::kFull && chunk_layers >= 4)
            for (int part : {chunk_layers / 4, chunk_layers / 2, 3 * chunk_layers / 4})
              if (part > 0 && part < chunk_layers) rcs.emplace_back(rc, part);
        }
        const long extra =
            static_cast<long>((rcs.size() - recomputes.size()) * mbss.size() * schedules.size());
        wk.enumerated += extra;
        for (const std::string& sched : schedules)
          for (auto [rc, rc_layers] : rcs)
            for (int mbs : mbss) {
              p.schedule = sched;
              p.recompute = rc;
              p.recompute_layers = rc_layers;
              p.mbs = mbs;
              if (const char* refusal = framework_refusal(opt.framework, p)) {
                wk.reject(Rejection::kFramework, 1, [&] { return std::string(refusal); });
                continue;
              }
              auto vv = validate_plan(m, n, w, p);
              if (vv.empty()) vv = validate_against_hardware(c.profile, w, p);
              if (!vv.empty()) {
                wk.reject(Rejection::kDivisibility, 1, [&] { return vv.front().reason; });
                continue;
              }
              Candidate cand;
              cand.plan = p;
              cand.estimate = evaluator.evaluate(m, c, w, p);
              ++wk.evaluated;
              if (cand.estimate.memory_peak.total_bytes() > budget) {
                wk.reject(Rejection::kMemory, 1, [&] {
                  return fmt::format("{}: {:.1f} GiB > {:.1f} GiB", p.describe(),
                                     cand.estimate.memory_peak.total_bytes() / units::kGiB,
                                     budget / units::kGiB);
                });
                continue;
              }
              ++wk.feasible;
              cand.objective = objective_of(cand.estimate, opt.objective, c);
              wk.offer(cand, opt.top_k);
            }
      }
    }
  };

  const int threads = std::max(
      1, opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<Worker> workers(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < layouts.size();
           i += static_cast<size_t>(threads)) {
        run_layout(layouts[i], workers[static_cast<size_t>(t)]);
        if (t == 0 && opt.progress)
          opt.progress(static_cast<double>(i + 1) / static_cast<double>(layouts.size()));
      }
    });
  for (auto& th : pool) th.join();

  // Merge deterministically.
  Worker all;
  for (auto& wk : workers) {
    for (int r = 0; r < kNumRejections; ++r) {
      all.rejected[static_cast<size_t>(r)] += wk.rejected[static_cast<size_t>(r)];
      if (all.example[static_cast<size_t>(r)].empty() ||
          (!wk.example[static_cast<size_t>(r)].empty() &&
           wk.example[static_cast<size_t>(r)] < all.example[static_cast<size_t>(r)]))
        all.example[static_cast<size_t>(r)] = wk.example[static_cast<size_t>(r)];
    }
    all.enumerated += wk.enumerated;
    all.evaluated += wk.evaluated;
    all.feasible += wk.feasible;
    for (const auto& cnd : wk.top) all.offer(cnd, opt.top_k);
  }
  std::vector<Candidate> front;
  for (auto& wk : workers) front.insert(front.end(), wk.pareto.begin(), wk.pareto.end());
  std::sort(front.begin(), front.end(), [](const Candidate& a, const Candidate& b) {
    if (a.estimate.step_time_s != b.estimate.step_time_s)
      return a.estimate.step_time_s < b.estimate.step_time_s;
    return plan_key(a.plan) < plan_key(b.plan);
  });
  for (const Candidate& cnd : front) {
    bool dominated = false;
    for (const Candidate& q : result.pareto)
      if (q.estimate.memory_peak.total_bytes() <= cnd.estimate.memory_peak.total_bytes())
        dominated = true;
    if (!dominated) result.pareto.push_back(cnd);
  }
  result.top = all.top;
  result.rejected = all.rejected;
  result.example = all.example;
  result.enumerated = all.enumerated;
  result.evaluated = all.evaluated;
  result.feasible = all.feasible;
  result.exhausted = true;
  result.threads = threads;
  result.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void refine_top(SearchResult& r, const ModelSpec& m, const Cluster& c, const Workload& w,
                const SearchOptions& opt, const IEvaluator& precise, int k) {
  const size_t n = std::min(r.top.size(), static_cast<size_t>(std::max(0, k)));
  for (size_t i = 0; i < n; ++i) {
    Candidate& cand = r.top[i];
    cand.estimate = precise.evaluate(m, c, w, cand.plan);
    cand.objective = objective_of(cand.estimate, opt.objective, c);
  }
  std::sort(r.top.begin(), r.top.begin() + static_cast<std::ptrdiff_t>(n), better);
}

}  // namespace dtplan
