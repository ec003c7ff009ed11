#include "planner/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "simulator/analytic/estimator.h"
#include "simulator/cost/memory_model.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/workload/stage_layout.h"

namespace dtplan {

const std::vector<std::string>& objective_names() {
  static const std::vector<std::string> names = {"step_time", "cost", "mfu", "memory"};
  return names;
}

std::string why_no_plan(const SearchResult& r) {
  int best = -1;
  for (int k = 0; k < kNumRejections; ++k)
    if (r.rejected[static_cast<size_t>(k)] > 0 &&
        (best < 0 || r.rejected[static_cast<size_t>(k)] > r.rejected[static_cast<size_t>(best)]))
      best = k;
  if (best < 0)
    return "no layout of these GPUs takes the pinned values (tp, pp, cp, ep, etp, vpp, mbs must "
           "divide what they split)";
  return fmt::format("{} ({} plans; e.g. {})", describe(static_cast<Rejection>(best)),
                     r.rejected[static_cast<size_t>(best)], r.example[static_cast<size_t>(best)]);
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
      return "fits, but cannot enter the top K or the Pareto front (floor)";
    case Rejection::kDeviceGroups:
      return "a pipeline stage spans two device groups (heterogeneous cluster)";
    case Rejection::kInvalid:
      return "other validation failure";
  }
  return "?";
}

namespace {

// Ascending; O(sqrt n), and no loop counter that could pass INT_MAX.
std::vector<int> divisors(int n) {
  std::vector<int> d, upper;
  for (int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      d.push_back(static_cast<int>(i));
      if (i * i != n) upper.push_back(static_cast<int>(n / i));
    }
  d.insert(d.end(), upper.rbegin(), upper.rend());
  return d;
}

bool allowed(const std::vector<int>& pin, int v) {
  return pin.empty() || std::find(pin.begin(), pin.end(), v) != pin.end();
}

// A total order on plans, for deterministic ties.
auto plan_key(const Plan& p) {
  return std::make_tuple(p.tp, p.pp, p.cp, p.dp, p.ep, p.etp, p.vpp, p.sp, p.zero,
                         static_cast<int>(p.recompute), p.recompute_layers, p.offload_layers, p.mbs,
                         p.gbs, std::cref(p.schedule), p.split_key());
}

// By the objective; at an equal objective the plan with less peak memory first (the same step
// with more headroom: a new-user trial found offload(14) at 57.6 GiB ranked above offload(28)
// at 41.6 GiB for the same 3.612 s), then the plan order.
bool ranks_before(double objective, double mem_bytes, const Plan& p, const Candidate& c) {
  if (objective != c.objective) return objective < c.objective;
  const double c_mem = c.estimate.memory_peak.total_bytes();
  if (mem_bytes != c_mem) return mem_bytes < c_mem;
  return plan_key(p) < plan_key(c.plan);
}

bool better(const Candidate& a, const Candidate& b) {
  if (a.objective != b.objective) return a.objective < b.objective;  // memory only on a tie
  return ranks_before(a.objective, a.estimate.memory_peak.total_bytes(), a.plan, b);
}

// Relative margin on floors: a plan is pruned only when its floor is behind by more than this,
// so that rounding in the floor's own arithmetic can never prune a plan that ranks.
constexpr double kFloorMargin = 1e-9;

struct Layout {
  int tp, pp, cp, dp, ep, etp;
};

// The plan fields a layout fixes, on the search's base plan.
Plan layout_plan(const Plan& base, const Layout& L, bool sp) {
  Plan p = base;
  p.tp = L.tp;
  p.pp = L.pp;
  p.cp = L.cp;
  p.dp = L.dp;
  p.ep = L.ep;
  p.etp = L.etp;
  p.sp = sp;
  p.tp_comm_overlap = base.tp_comm_overlap && sp && L.tp > 1;
  return p;
}

// A point of the Pareto front: `t` is step time (or time per token), `mem` peak memory; the
// candidate is in the worker's pool (the front is reordered often: points stay small).
struct FrontPoint {
  double t, mem;
  uint32_t slot;
};

struct Worker {
  std::vector<Candidate> top;      // best first, at most K
  std::vector<FrontPoint> pareto;  // non-dominated, by (t, mem, plan): memory decreasing
  std::vector<Candidate> pool;     // the front's candidates
  std::vector<uint32_t> free_slots;
  std::array<long, kNumRejections> rejected{};
  std::array<std::string, kNumRejections> example{};
  long enumerated = 0, evaluated = 0, feasible = 0;
  // Per data-parallel size: each micro-batch size with the global batches (indices, largest
  // first) it divides per replica; the same for every layout of that size.
  std::unordered_map<int, std::vector<std::pair<int, std::vector<size_t>>>> batches_by_dp;

  // `why` is formatted only for the first plan rejected for a reason (an example to show).
  template <typename Why>
  void reject(Rejection r, long n, Why&& why) {
    rejected[static_cast<size_t>(r)] += n;
    if (example[static_cast<size_t>(r)].empty()) example[static_cast<size_t>(r)] = why();
  }

  const Candidate& at(const FrontPoint& q) const { return pool[q.slot]; }

  // (t, mem, plan) lexicographically: the order of the front.
  bool before(double t, double mem, const Plan& p, const FrontPoint& q) const {
    if (t != q.t) return t < q.t;
    if (mem != q.mem) return mem < q.mem;
    return plan_key(p) < plan_key(at(q).plan);
  }

  // Index of the first front point after (t, mem, p).
  size_t front_after(double t, double mem, const Plan& p) const {
    return static_cast<size_t>(
        std::partition_point(pareto.begin(), pareto.end(),
                             [&](const FrontPoint& q) { return !before(t, mem, p, q); }) -
        pareto.begin());
  }

  // A plan q dominates p when q.t <= p.t and q.mem <= p.mem, and (t, mem, plan) orders q first
  // (ties broken by the plan order). The point just before p's place has the least memory of
  // all that order first, so it is the one to check.
  bool dominated(double t, double mem, const Plan& p) const {
    const size_t i = front_after(t, mem, p);
    return i > 0 && pareto[i - 1].mem <= mem;
  }

  // Whether some point is faster than `t_floor` (by the margin) with no more memory than `mem`:
  // then every plan with time >= t_floor and memory `mem` is strictly dominated.
  bool dominated_below(double t_floor, double mem) const {
    const double t = t_floor * (1 - kFloorMargin);
    const auto it = std::partition_point(pareto.begin(), pareto.end(),
                                         [&](const FrontPoint& q) { return q.t < t; });
    return it != pareto.begin() && std::prev(it)->mem <= mem;
  }

  bool enters_top(double objective, double mem_bytes, const Plan& p, int k) const {
    return static_cast<int>(top.size()) < k || ranks_before(objective, mem_bytes, p, top.back());
  }
  void add_top(Candidate c, int k) {
    auto pos = std::upper_bound(top.begin(), top.end(), c, better);
    top.insert(pos, c);
    if (static_cast<int>(top.size()) > k) top.pop_back();
  }
  // Inserts a point that no point dominates at its place `i`; the points after it with as much
  // memory or more are dominated by it now (a run starting at `i`: memory decreases).
  void add_front(size_t i, double t, double mem, Candidate c) {
    size_t end = i;
    while (end < pareto.size() && pareto[end].mem >= mem) free_slots.push_back(pareto[end++].slot);
    pareto.erase(pareto.begin() + static_cast<std::ptrdiff_t>(i),
                 pareto.begin() + static_cast<std::ptrdiff_t>(end));
    uint32_t slot;
    if (!free_slots.empty()) {
      slot = free_slots.back();
      free_slots.pop_back();
      pool[slot] = c;
    } else {
      slot = static_cast<uint32_t>(pool.size());
      pool.push_back(c);
    }
    pareto.insert(pareto.begin() + static_cast<std::ptrdiff_t>(i), FrontPoint{t, mem, slot});
  }
  void offer_front(double t, double mem, Candidate c) {
    const size_t i = front_after(t, mem, c.plan);
    if (i > 0 && pareto[i - 1].mem <= mem) return;
    add_front(i, t, mem, c);
  }

  // Keeps the plan if it enters the top K or the front; copies it (plan and estimate) only then.
  void offer(const Plan& p, const Estimate& e, double objective, double t, double mem, int k) {
    const bool in_top = enters_top(objective, mem, p, k);
    const size_t i = front_after(t, mem, p);
    const bool on_front = !(i > 0 && pareto[i - 1].mem <= mem);
    if (!in_top && !on_front) return;
    if (on_front && in_top) {
      add_front(i, t, mem, Candidate{p, e, objective});
      add_top(Candidate{p, e, objective}, k);
    } else if (on_front) {
      add_front(i, t, mem, Candidate{p, e, objective});
    } else {
      add_top(Candidate{p, e, objective}, k);
    }
  }
};

}  // namespace

double objective_value(const Estimate& e, Objective o, const Cluster& c, double tokens,
                       bool per_token) {
  const double per = per_token && tokens > 0 ? tokens : 1.0;
  switch (o) {
    case Objective::kStepTime:
      return e.step_time_s / per;
    case Objective::kCost: {
      double price = c.profile.usd_per_gpu_hour.value_or(1.0);  // GPU-hours when unpriced
      if (c.heterogeneous()) {
        // The mean price of the job's GPUs; GPU-hours unless every group has a price.
        double sum = 0;
        bool priced = true;
        for (int g = 0; g < c.groups_used(); ++g) {
          const auto& u = c.groups[static_cast<size_t>(g)].profile.usd_per_gpu_hour;
          priced = priced && u.has_value();
          sum += (c.group_first_rank(g + 1) - c.group_first_rank(g)) * u.value_or(1.0);
        }
        price = priced ? sum / c.num_gpus : 1.0;
      }
      return e.step_time_s * c.num_gpus * price / 3600.0 / per;
    }
    case Objective::kMfu:
      return -e.mfu;
    case Objective::kMemory:
      return e.memory_peak.total_bytes();
  }
  return e.step_time_s / per;
}

SearchResult search(const ModelSpec& m, const Cluster& c, const Workload& w,
                    const SearchSpace& space, const SearchOptions& opt,
                    const IEvaluator& evaluator) {
  const auto start = std::chrono::steady_clock::now();
  const int n = c.num_gpus;
  // With device groups: TP must fit every group's NVLink domain; the memory budget is each
  // stage's own GPU's (the estimate's memory_capacity_bytes), and the parameter-state gate
  // refuses only what no group's GPU could hold.
  const bool hetero = c.heterogeneous();
  // Activation offloading is enumerated where Megatron-Core's rules apply (the framework that
  // runs it here) and the hardware has a host link (validate_against_hardware).
  bool offload_allowed = opt.framework_rules && opt.framework == Framework::kMegatron &&
                         c.profile.host.pcie_gbps_per_gpu > 0;
  for (int g = 0; hetero && g < c.groups_used(); ++g)
    offload_allowed &= c.groups[static_cast<size_t>(g)].profile.host.pcie_gbps_per_gpu > 0;
  int domain = std::max(1, c.profile.node.placement_domain_gpus());
  double largest_gib = c.profile.gpu.memory_gib;
  for (int g = 0; hetero && g < c.groups_used(); ++g) {
    const HardwareProfile& gp = c.groups[static_cast<size_t>(g)].profile;
    domain = std::min(domain, std::max(1, gp.node.placement_domain_gpus()));
    largest_gib = std::max(largest_gib, gp.gpu.memory_gib);
  }
  const double budget = largest_gib * units::kGiB * (1.0 - opt.memory_margin);
  auto budget_of = [&](const Estimate& e) {
    return hetero ? e.memory_capacity_bytes * (1.0 - opt.memory_margin) : budget;
  };
  const int top_k = std::max(1, opt.top_k);
  SearchResult result;

  // One workload per global batch: the evaluator sees each plan with its own.
  std::vector<Workload> works;
  {
    std::vector<int64_t> batches = space.gbs;
    if (batches.empty()) batches.push_back(w.global_batch);
    std::sort(batches.begin(), batches.end());
    batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
    for (int64_t g : batches) {
      if (g < 1) continue;  // no such batch (the CLI refuses it)
      Workload x = w;
      x.global_batch = g;
      works.push_back(x);
    }
  }
  const bool per_token = works.size() > 1;

  // Outer layouts: tp x pp x cp x dp (x ep x etp for MoE), enumerated up front.
  std::vector<Layout> layouts;
  // Sequence parallelism pinned on needs a TP group, a pinned schedule a pipeline: the layouts
  // without one are not of the space (estimate refuses them alike).
  for (int tp : divisors(n)) {
    if (!allowed(space.tp, tp) || (space.sp.value_or(false) && tp == 1)) continue;
    for (int pp : divisors(n / tp)) {
      if (!allowed(space.pp, pp) || (!space.schedules.empty() && pp == 1)) continue;
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
  // Schedule names made once (interned): the loops below copy them into plans, a pointer each.
  std::vector<ScheduleName> schedule_pool;
  for (const std::string& s : space.schedules.empty() ? schedule_names() : space.schedules)
    schedule_pool.emplace_back(s);
  static const ScheduleName kOneFOneB("1f1b");
  // The training precision must have a tensor-core peak: one check for the whole search.
  std::vector<Violation> hw_violations = validate_against_hardware(c.profile, w, Plan{});
  for (int g = 1; hetero && g < c.groups_used() && hw_violations.empty(); ++g)
    hw_violations = validate_against_hardware(c.groups[static_cast<size_t>(g)].profile, w, Plan{});
  const ParamCounts counts = count_params(m);

  auto run_layout = [&](const Layout& L, Worker& wk) {
    // Chunks per rank, and whether the embedding and the loss count as one layer each of the
    // first and last chunks (Megatron-Core's --account-for-embedding/loss-in-pipeline-split):
    // how interleaving takes layers that do not divide, as Llama 3 405B's 126 layers on 16
    // stages (Llama 3 paper §3.3.2: one layer fewer on the first and last stages).
    struct Chunking {
      int v;
      bool counted;
      int split_layers = 0;  // the two-part split's A (Plan::split_layers); 0 = none
    };
    std::vector<Chunking> vpps = {{1, false}};
    if (L.pp > 1)
      for (int v = 2; v <= 8; ++v) {
        if (m.layers % (L.pp * v) == 0)
          vpps.push_back({v, false});
        else if ((m.layers + 2) % (L.pp * v) == 0 && (m.layers + 2) / (L.pp * v) >= 2)
          vpps.push_back({v, true});
      }
    // Device groups: the first group's stages may hold more or fewer layers than the others
    // (--stage-split K:A, K = the stages in the first group), every A whose rest divides.
    int split_k = 0;
    if (hetero && L.pp > 1 && c.groups_used() >= 2 && n % L.pp == 0) {
      const int per_stage = n / L.pp, first = c.group_first_rank(1);
      if (first % per_stage == 0 && first / per_stage < L.pp) split_k = first / per_stage;
      for (int a = 1; split_k > 0 && a * split_k < m.layers; ++a) {
        const int rest = m.layers - a * split_k;
        if (rest % (L.pp - split_k) == 0 && rest / (L.pp - split_k) != a)
          vpps.push_back({1, false, a});
      }
    }
    if (!space.vpp.empty()) {
      std::vector<Chunking> keep;
      for (const Chunking& v : vpps)
        if (allowed(space.vpp, v.v)) keep.push_back(v);
      vpps = keep;
    }
    const bool sp = space.sp.value_or(L.tp > 1) && L.tp > 1;
    // Uneven stages where the layers do not divide (Megatron: fewer layers on the first and
    // last stages), only without interleaving.
    const bool uneven = L.pp > 2 && m.layers % L.pp != 0;
    const bool cross_node = L.tp > domain && !opt.allow_cross_node_tp;
    // A heterogeneous cluster: every stage inside one device group (depends on pp alone).
    std::string spans;
    if (hetero) {
      Plan q = layout_plan(opt.base_plan, L, false);
      for (const Violation& v : validate_against_cluster(c, w, q))
        if (v.flag != "--precision") spans = v.reason;
    }

    Plan p = layout_plan(opt.base_plan, L, sp);
    std::vector<const ScheduleName*> schedules;
    // (recomputation, layers recomputed per chunk, layers offloaded per chunk)
    std::vector<std::tuple<Recompute, int, int>> rcs;
    // What holds for every global batch: framework refusal and parameter-state memory, per
    // (zero, schedule), worked out when a sub-space first passes the cheaper checks.
    struct Gate {
      enum { kUnknown, kOpen, kFramework, kStates } state;
      const char* refusal;
      double states;
    };
    std::vector<Gate> gates;  // [zero index][schedule]
    struct Validity {
      bool known = false, ok = false;
      Violation first;
    };
    std::vector<Validity> validity;  // [zero index]
    struct Combo {
      int zero;
      size_t s;
    };
    std::vector<Combo> combos;
    std::vector<double> floors;
    std::vector<size_t> valid_batches;  // positions in a batch list the schedule accepts
    std::vector<const IPipelineSchedule*> sched_objs;  // parallel to `schedules`

    for (const auto [vpp, counted, split_a] : vpps) {
      schedules.clear();
      if (L.pp == 1) {
        if (vpp > 1) continue;
        schedules.push_back(&kOneFOneB);
      } else {
        for (const auto& s : schedule_pool) {
          const IPipelineSchedule* sch = find_schedule(s);
          if (sch && sch->accepts_chunks(vpp)) schedules.push_back(&s);
        }
      }
      if (schedules.empty()) continue;
      sched_objs.clear();
      for (const ScheduleName* s : schedules) sched_objs.push_back(find_schedule(*s));
      // Full recomputation of all layers, or of a share of each chunk's layers (partial).
      const int chunk_layers = std::max(1, m.layers / (L.pp * vpp));
      rcs.clear();
      for (Recompute rc : recomputes) {
        rcs.emplace_back(rc, 0, 0);
        if (rc == Recompute::kFull && chunk_layers >= 4)
          for (int part : {chunk_layers / 4, chunk_layers / 2, 3 * chunk_layers / 4})
            if (part > 0 && part < chunk_layers) rcs.emplace_back(rc, part, 0);
        // Activation offloading of a share of the layers instead of recomputing them, where
        // Megatron-Core runs it: without pipeline parallelism or recomputation.
        if (rc == Recompute::kNone && L.pp == 1 && offload_allowed && chunk_layers >= 4)
          for (int part : {chunk_layers / 4, chunk_layers / 2, 3 * chunk_layers / 4})
            if (part > 0 && part < chunk_layers) rcs.emplace_back(rc, 0, part);
      }
      p.vpp = vpp;
      p.uneven_pp = uneven && vpp == 1 && split_a == 0;
      p.account_for_embedding = p.account_for_loss = counted;
      p.split_stages = split_a > 0 ? split_k : 0;
      p.split_layers = split_a;
      p.recompute = Recompute::kNone;
      p.recompute_layers = 0;
      p.offload_layers = 0;
      p.gbs = works.front().global_batch;
      p.mbs = 1;

      gates.assign(zeros.size() * schedules.size(), Gate{Gate::kUnknown, nullptr, 0});
      validity.assign(zeros.size(), Validity{});
      // p.zero and p.schedule set: framework refusal, then the parameter states of the first
      // and last stage (a memory floor without activations).
      auto gate = [&](size_t zi, size_t s) -> const Gate& {
        Gate& g = gates[zi * schedules.size() + s];
        if (g.state != Gate::kUnknown) return g;
        if (const char* refusal =
                opt.framework_rules ? framework_refusal(opt.framework, p, m) : nullptr) {
          g = {Gate::kFramework, refusal, 0};
          return g;
        }
        const IPipelineSchedule* sch = plan_schedule(p);
        // Schedules with as many parameter copies have the same states: reuse them.
        for (size_t o = 0; o < s; ++o) {
          const Gate& h = gates[zi * schedules.size() + o];
          if ((h.state == Gate::kOpen || h.state == Gate::kStates) &&
              find_schedule(*schedules[o])->parameter_copies() == sch->parameter_copies()) {
            g = {h.state, nullptr, h.states};
            return g;
          }
        }
        double states = 0;
        for (int rank : {0, p.pp - 1}) {
          StageMemory sm = stage_memory(m, w, p, *sch, rank, counts, ActivationInputs{},
                                        layers_on_rank(m, p, rank));
          states = std::max(states, sm.weights_bytes + sm.grads_bytes + sm.optimizer_bytes);
        }
        g = {states > budget ? Gate::kStates : Gate::kOpen, nullptr, states};
        return g;
      };

      // Micro-batch sizes, and for each the global batches it divides per data-parallel
      // replica, largest first (the best time per token comes early, and the floor prunes
      // more). Everything above the batch loop holds for every batch.
      auto [found, fresh] = wk.batches_by_dp.try_emplace(L.dp);
      std::vector<std::pair<int, std::vector<size_t>>>& mbs_batches = found->second;
      if (fresh) {
        auto add_mbs = [&](int b) {
          std::vector<size_t> gs;
          for (size_t gi = works.size(); gi-- > 0;) {
            const int64_t gbs = works[gi].global_batch;
            if (gbs % L.dp == 0 && (gbs / L.dp) % b == 0) gs.push_back(gi);
          }
          if (!gs.empty()) mbs_batches.emplace_back(b, std::move(gs));
        };
        for (int b = 1; b <= opt.max_mbs; b *= 2)
          if (allowed(space.mbs, b)) add_mbs(b);
        for (int b : space.mbs)
          if (b > opt.max_mbs) add_mbs(b);
      }
      if (mbs_batches.empty()) continue;
      long pairs = 0;  // (micro-batch, batch) pairs
      for (const auto& [b, gs] : mbs_batches) pairs += static_cast<long>(gs.size());
      const long per_schedule = static_cast<long>(rcs.size()) * pairs;
      const long per_zero = per_schedule * static_cast<long>(schedules.size());
      const Workload& w_first = works.back();
      p.gbs = w_first.global_batch;
      p.mbs = mbs_batches.front().first;
      p.recompute = Recompute::kNone;
      p.recompute_layers = 0;
      p.offload_layers = 0;
      combos.clear();
      for (size_t zi = 0; zi < zeros.size(); ++zi) {
        p.zero = zeros[zi];
        if (p.zero > 0 && L.dp * L.cp == 1) continue;  // nothing to shard over: same as zero 0
        wk.enumerated += per_zero;
        // Checks that hold for the whole sub-space.
        if (cross_node) {
          wk.reject(Rejection::kCrossNodeTp, per_zero,
                    [&] { return fmt::format("TP{} > {} GPUs per NVLink domain", L.tp, domain); });
          continue;
        }
        if (!hw_violations.empty()) {
          wk.reject(Rejection::kInvalid, per_zero, [&] { return hw_violations.front().reason; });
          continue;
        }
        if (!spans.empty()) {
          wk.reject(Rejection::kDeviceGroups, per_zero,
                    [&] { return fmt::format("PP{}: {}", L.pp, spans); });
          continue;
        }
        // Validated once per (vpp, zero) for every global batch: the inner values (schedule,
        // recomputation, micro-batch, batch) are valid by construction: schedules accept the
        // chunks, micro-batches divide the batch per data-parallel replica.
        Validity& val = validity[zi];
        if (!val.known) {
          Plan q = p;
          q.schedule = *schedules.front();
          q.gbs = L.dp;  // divisible by mbs x dp (mbs 1): the batch's checks are the loop's
          q.mbs = 1;
          auto v = validate_plan(m, n, w_first, q);
          val.known = true;
          val.ok = v.empty();
          if (!val.ok) val.first = std::move(v.front());
        }
        if (!val.ok) {
          const bool div = val.first.flag != "--zero" && val.first.flag != "--precision";
          wk.reject(div ? Rejection::kDivisibility : Rejection::kInvalid, per_zero, [&] {
            return fmt::format("{} {}: {}", p.describe(), val.first.flag, val.first.reason);
          });
          continue;
        }
        for (size_t s = 0; s < schedules.size(); ++s) {
          p.schedule = *schedules[s];
          const Gate& g = gate(zi, s);
          if (g.state == Gate::kFramework) {
            wk.reject(Rejection::kFramework, per_schedule, [&] { return std::string(g.refusal); });
            continue;
          }
          if (g.state == Gate::kStates) {
            wk.reject(Rejection::kMemoryStates, per_schedule, [&] {
              return fmt::format("{}: {:.1f} GiB of states > {:.1f} GiB", p.describe(),
                                 g.states / units::kGiB, budget / units::kGiB);
            });
            continue;
          }
          combos.push_back({p.zero, s});
        }
      }
      if (combos.empty()) continue;
      // Schedule by schedule (the plan's schedule name is copied when it changes).
      std::stable_sort(combos.begin(), combos.end(),
                       [](const Combo& a, const Combo& b) { return a.s < b.s; });

      // Is a plan whose step time is at least `fl` (per token with several batches) and whose
      // memory is at least `mem` unable to enter the top K or the Pareto front?
      auto cannot_enter = [&](double fl, double tokens, double mem) {
        const Candidate& kth = wk.top.back();
        const double per = per_token ? tokens : 1.0;
        bool behind = false;
        switch (opt.objective) {
          case Objective::kStepTime:
          case Objective::kCost: {
            Estimate lo;
            lo.step_time_s = fl;
            const double floor_obj = objective_value(lo, opt.objective, c, tokens, per_token);
            behind = floor_obj > kth.objective + kFloorMargin * std::fabs(kth.objective);
            break;
          }
          case Objective::kMfu: {
            // MFU counts model FLOPs, a fixed number per token: it ranks as time per token does.
            const double kth_tokens =
                static_cast<double>(kth.plan.gbs) * static_cast<double>(w.seq_len);
            behind = fl / tokens > kth.estimate.step_time_s / kth_tokens * (1 + kFloorMargin);
            break;
          }
          case Objective::kMemory:
            behind = mem > kth.objective + kFloorMargin * std::fabs(kth.objective);
            break;
        }
        return behind && wk.dominated_below(fl / per, mem);
      };

      for (auto [rc, rc_layers, offload] : rcs)
        for (const auto& [mbs, batches] : mbs_batches) {
          p.recompute = rc;
          p.recompute_layers = rc_layers;
          p.offload_layers = offload;
          p.mbs = mbs;
          // Offloaded activations live in pinned host memory: a node's GPUs together must fit
          // its host memory (the same for every ZeRO stage, schedule and batch).
          if (offload > 0) {
            std::string why = host_memory_violation(m, works.front(), p, c.profile);
            for (int g = 0; hetero && why.empty() && g < c.groups_used(); ++g)
              why = host_memory_violation(m, works.front(), p,
                                          c.groups[static_cast<size_t>(g)].profile);
            if (!why.empty()) {
              wk.reject(Rejection::kMemory, static_cast<long>(combos.size() * batches.size()),
                        [&] { return fmt::format("{}: {}", p.describe(), why); });
              continue;
            }
          }
          // Per (schedule, batch): the step-time floor, computed when needed.
          floors.assign(schedules.size() * batches.size(), -1.0);
          size_t assigned = schedules.size();  // which schedule p.schedule holds
          for (const Combo& k : combos) {
            p.zero = k.zero;
            if (assigned != k.s) {
              p.schedule = *schedules[k.s];
              assigned = k.s;
            }
            const IPipelineSchedule& sched = *sched_objs[k.s];
            // Several batches: the whole range at once where it can be decided from two
            // bounds (exact, by the schedule contract in i_pipeline_schedule.h): every batch's
            // step is at least its micro-batches times the busiest rank's work per
            // micro-batch, the same time per token for every batch; and its memory at least
            // the smallest batch's (activations in flight do not fall as micro-batches are
            // added).
            if (batches.size() > 1 && opt.prune && !hetero) {
              valid_batches.clear();
              for (size_t j = 0; j < batches.size(); ++j)
                if (L.pp == 1 ||
                    sched.accepts_microbatches(
                        L.pp, vpp,
                        static_cast<int>(works[batches[j]].global_batch / (int64_t{L.dp} * mbs))))
                  valid_batches.push_back(j);
              const long invalid =
                  static_cast<long>(batches.size()) - static_cast<long>(valid_batches.size());
              // (A structured binding is named through a reference: clang 14 cannot capture one.)
              auto memory_at = [&, &batch_list = batches](size_t j) {
                p.gbs = works[batch_list[j]].global_batch;
                return evaluator.peak_memory(m, c, works[batch_list[j]], p);
              };
              const std::optional<double> low =
                  valid_batches.empty() ? std::nullopt : memory_at(valid_batches.back());
              if (low) {
                const Workload& ws = works[batches[valid_batches.back()]];
                p.gbs = ws.global_batch;
                const long valid = static_cast<long>(valid_batches.size());
                bool decided = false;
                if (*low > budget) {
                  wk.reject(Rejection::kMemory, valid, [&] {
                    return fmt::format("{}: {:.1f} GiB > {:.1f} GiB", p.describe(),
                                       *low / units::kGiB, budget / units::kGiB);
                  });
                  decided = true;
                } else if (static_cast<int>(wk.top.size()) >= top_k && !wk.pareto.empty()) {
                  const double per_mb = evaluator.microbatch_time_floor(m, c, ws, p);
                  const double m_s = static_cast<double>(p.num_microbatches());
                  const double tokens_s =
                      static_cast<double>(ws.global_batch) * static_cast<double>(ws.seq_len);
                  if (per_mb > 0 && cannot_enter(per_mb * m_s, tokens_s, *low)) {
                    // The batches that do not fit are a prefix (memory does not fall as the
                    // batch grows): found by bisection, they are refused for memory.
                    size_t lo = 0, hi = valid_batches.size() - 1;
                    while (lo < hi) {
                      const size_t mid = (lo + hi) / 2;
                      if (*memory_at(valid_batches[mid]) > budget)
                        lo = mid + 1;
                      else
                        hi = mid;
                    }
                    const long over = static_cast<long>(lo);
                    if (over > 0) {
                      const double big = *memory_at(valid_batches.front());
                      wk.reject(Rejection::kMemory, over, [&] {
                        return fmt::format("{}: {:.1f} GiB > {:.1f} GiB", p.describe(),
                                           big / units::kGiB, budget / units::kGiB);
                      });
                    }
                    p.gbs = ws.global_batch;
                    wk.reject(Rejection::kCannotBeatTopK, valid - over, [&] {
                      return fmt::format("{}: at least {:.3f} s per micro-batch", p.describe(),
                                         per_mb);
                    });
                    decided = true;
                  }
                }
                if (decided) {
                  if (invalid > 0)
                    wk.reject(Rejection::kDivisibility, invalid, [&] {
                      return fmt::format("{}: {}", p.describe(), sched.microbatches_rule());
                    });
                  continue;
                }
              }
            }
            for (size_t bi = 0; bi < batches.size(); ++bi) {
              const Workload& wl = works[batches[bi]];
              p.gbs = wl.global_batch;
              const double tokens =
                  static_cast<double>(wl.global_batch) * static_cast<double>(wl.seq_len);
              // The schedule's rule on the micro-batch count (interleaving: a multiple of pp).
              if (L.pp > 1 && !sched.accepts_microbatches(L.pp, vpp, p.num_microbatches())) {
                wk.reject(Rejection::kDivisibility, 1, [&] {
                  return fmt::format("{}: {}", p.describe(), sched.microbatches_rule());
                });
                continue;
              }
              // The memory check ahead of the estimate serves the pruning; without it the
              // estimate's own memory decides (the same number), at no extra cost.
              if (const std::optional<double> peak =
                      opt.prune && !hetero ? evaluator.peak_memory(m, c, wl, p) : std::nullopt) {
                const double mem = *peak;
                if (mem > budget) {
                  wk.reject(Rejection::kMemory, 1, [&] {
                    return fmt::format("{}: {:.1f} GiB > {:.1f} GiB", p.describe(),
                                       mem / units::kGiB, budget / units::kGiB);
                  });
                  continue;
                }
                if (opt.prune && static_cast<int>(wk.top.size()) >= top_k && !wk.pareto.empty()) {
                  double& shared = floors[k.s * batches.size() + bi];  // for every ZeRO stage
                  if (shared < 0) shared = evaluator.step_time_floor(m, c, wl, p);
                  // The plan's own ZeRO stage's part only where the shared floor does not do.
                  double fl = shared;
                  if (!cannot_enter(fl, tokens, mem)) fl += evaluator.zero_time_floor(m, c, wl, p);
                  if (cannot_enter(fl, tokens, mem)) {
                    wk.reject(Rejection::kCannotBeatTopK, 1, [&] {
                      return fmt::format("{}: at least {:.3f} s per step", p.describe(), fl);
                    });
                    continue;
                  }
                }
              }
              const Estimate est = evaluator.evaluate(m, c, wl, p);
              ++wk.evaluated;
              const double mem = est.memory_peak.total_bytes();
              if (mem > budget_of(est)) {
                wk.reject(Rejection::kMemory, 1, [&] {
                  return fmt::format("{}: {:.1f} GiB > {:.1f} GiB", p.describe(), mem / units::kGiB,
                                     budget_of(est) / units::kGiB);
                });
                continue;
              }
              ++wk.feasible;
              const double obj = objective_value(est, opt.objective, c, tokens, per_token);
              wk.offer(p, est, obj, est.step_time_s / (per_token ? tokens : 1.0), mem, top_k);
            }
          }
        }
    }
  };

  // A layout's promise, for the order a worker visits its layouts in when pruning: the floor of
  // one plan of it (first vpp and schedule, first recomputation, smallest micro-batch, largest
  // batch), per token with several batches. Infinite when that plan is not valid; only the
  // order depends on it, never the results.
  auto promise = [&](const Layout& L) {
    constexpr double kNone = std::numeric_limits<double>::infinity();
    if (L.tp > domain && !opt.allow_cross_node_tp) return kNone;
    Plan p = layout_plan(opt.base_plan, L, space.sp.value_or(L.tp > 1) && L.tp > 1);
    for (int s = 0; hetero && s < p.pp; ++s)
      if (stage_device_group(c, p, s) < 0) return kNone;
    p.vpp = 1;
    for (int v = L.pp > 1 ? 1 : 9; v <= 8; ++v)  // the first vpp the layout takes
      if (m.layers % (L.pp * v) == 0 && allowed(space.vpp, v)) {
        p.vpp = v;
        break;
      }
    p.uneven_pp = L.pp > 2 && m.layers % L.pp != 0 && p.vpp == 1;
    p.recompute = recomputes.front();
    p.zero = 0;
    const Workload& wl = works.back();
    p.gbs = wl.global_batch;
    p.mbs = 0;
    for (int b = 1; b <= opt.max_mbs && p.mbs == 0; b *= 2)
      if (p.gbs % (int64_t{b} * L.dp) == 0 && allowed(space.mbs, b)) p.mbs = b;
    if (p.mbs == 0) return kNone;
    bool found = L.pp == 1;
    p.schedule = kOneFOneB;
    for (size_t s = 0; s < schedule_pool.size() && !found; ++s) {
      const IPipelineSchedule* sch = find_schedule(schedule_pool[s]);
      p.schedule = schedule_pool[s];
      found = sch && sch->accepts_chunks(p.vpp) &&
              !(opt.framework_rules && framework_refusal(opt.framework, p, m));
    }
    if (!found || !validate_plan(m, n, wl, p).empty() || !validate_schedule(p).empty())
      return kNone;
    const double floor = evaluator.step_time_floor(m, c, wl, p);
    return per_token ? floor / static_cast<double>(p.gbs) : floor;
  };

  const int threads = std::max(
      1, opt.threads > 0 ? opt.threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<Worker> workers(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      // Every threads-th layout is this worker's; with pruning, the most promising first, so
      // that its K-th best and front are good early and the floor skips more.
      std::vector<std::pair<double, size_t>> mine;
      for (size_t i = static_cast<size_t>(t); i < layouts.size(); i += static_cast<size_t>(threads))
        mine.emplace_back(opt.prune ? promise(layouts[i]) : 0.0, i);
      if (opt.prune) std::sort(mine.begin(), mine.end());
      for (size_t k = 0; k < mine.size(); ++k) {
        run_layout(layouts[mine[k].second], workers[static_cast<size_t>(t)]);
        if (t == 0 && opt.progress)
          opt.progress(static_cast<double>(k + 1) / static_cast<double>(mine.size()));
      }
    });
  for (auto& th : pool) th.join();

  // Merge deterministically: the top K and the front of the union are those of the workers'.
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
    for (auto& cnd : wk.top)
      if (all.enters_top(cnd.objective, cnd.estimate.memory_peak.total_bytes(), cnd.plan, top_k))
        all.add_top(cnd, top_k);
    for (const FrontPoint& q : wk.pareto) all.offer_front(q.t, q.mem, wk.pool[q.slot]);
  }
  result.top = std::move(all.top);
  for (const FrontPoint& q : all.pareto) result.pareto.push_back(all.pool[q.slot]);
  result.rejected = all.rejected;
  result.example = all.example;
  result.enumerated = all.enumerated;
  result.evaluated = all.evaluated;
  result.feasible = all.feasible;
  result.exhausted = true;
  result.per_token = per_token;
  result.threads = threads;
  result.elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void refine_top(SearchResult& r, const ModelSpec& m, const Cluster& c, const Workload& w,
                const SearchOptions& opt, const IEvaluator& precise, int k) {
  const size_t n = std::min(r.top.size(), static_cast<size_t>(std::max(0, k)));
  // Each plan on its own (the evaluator is shared and stateless per call): the threads take
  // the next plan in turn, so the result does not depend on their number.
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        Candidate& cand = r.top[i];
        Workload wc = w;
        if (cand.plan.gbs > 0) wc.global_batch = cand.plan.gbs;
        cand.estimate = precise.evaluate(m, c, wc, cand.plan);
        cand.refined = true;
        cand.objective = objective_value(
            cand.estimate, opt.objective, c,
            static_cast<double>(wc.global_batch) * static_cast<double>(wc.seq_len), r.per_token);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next = n;
      }
    }
  };
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads =
      std::min(n, static_cast<size_t>(opt.threads > 0 ? static_cast<unsigned>(opt.threads) : hw));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  std::stable_sort(r.top.begin(), r.top.begin() + static_cast<std::ptrdiff_t>(n), better);
}

void distinct_layouts_first(SearchResult& r, size_t k) {
  auto key = [](const Plan& p) {
    return std::tuple(p.tp, p.pp, p.cp, p.ep, p.zero, static_cast<int>(p.recompute));
  };
  std::vector<Candidate> first, rest;
  std::vector<decltype(key(Plan{}))> seen;
  for (const Candidate& c : r.top) {
    const auto kc = key(c.plan);
    if (std::find(seen.begin(), seen.end(), kc) == seen.end()) {
      seen.push_back(kc);
      first.push_back(c);
    } else {
      rest.push_back(c);
    }
  }
  for (const Candidate& c : rest) first.push_back(c);
  if (first.size() > k) first.resize(k);
  r.top = std::move(first);
}

}  // namespace dtplan
