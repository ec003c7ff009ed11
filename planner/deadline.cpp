#include "planner/deadline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "core/units.h"
#include "simulator/cost/flops.h"

namespace dtplan {

namespace {

// Model FLOPs per token (Megatron's count, as the MFU takes it) at the workload's sequence.
double model_flops_per_token(const ModelSpec& m, const Workload& w) {
  Workload one = w;
  one.global_batch = 1;
  Plan p;
  p.gbs = 1;
  return step_flops(m, one, p, FlopsConvention::kCausalHalf).model / static_cast<double>(w.seq_len);
}

// The best plan on `gpus` GPUs, ranked by step time (time to train is what both inversions
// ask, whatever the caller's objective), and its time to train in days; false when none fits.
bool best_on(const ModelSpec& m, const Cluster& base, const Workload& w, const SearchSpace& space,
             const SearchOptions& opt, const IEvaluator& evaluator, int gpus, Candidate& best,
             double& days) {
  Cluster c = base;
  c.num_gpus = gpus;
  SearchOptions o = opt;
  o.top_k = 1;
  o.progress = nullptr;
  o.objective = Objective::kStepTime;
  const SearchResult r = search(m, c, w, space, o, evaluator);
  if (r.top.empty()) return false;
  best = r.top.front();
  days = w.train_tokens / best.estimate.tokens_per_s / units::kSecondsPerDay;
  return true;
}

}  // namespace

DeadlineAnswer fewest_gpus_for_deadline(const ModelSpec& m, const Cluster& base, const Workload& w,
                                        const SearchSpace& space, const SearchOptions& opt,
                                        const IEvaluator& evaluator, double deadline_days,
                                        int max_gpus) {
  DeadlineAnswer a;
  const int node = std::max(1, base.profile.node.gpus_per_node);
  a.max_gpus = max_gpus / node * node;
  // The peak bound: every FLOP of the run at 100% of the peak (model FLOPs as the MFU counts).
  const double flops_per_token = model_flops_per_token(m, w);
  const double peak = base.profile.gpu.peak_flops(w.precision);
  const double bound =
      w.train_tokens * flops_per_token / (peak * deadline_days * units::kSecondsPerDay);
  a.peak_bound_gpus = static_cast<int>(
      std::min<double>(a.max_gpus + node, std::ceil(std::max(1.0, bound) / node) * node));

  a.fastest_days = std::numeric_limits<double>::infinity();
  if (a.max_gpus < node) return a;  // not one whole node
  // The best plan on `g` GPUs and whether it meets the deadline.
  auto meets = [&](int g, Candidate* out, double* days) {
    Candidate best;
    double d = 0;
    ++a.counts_searched;
    if (!best_on(m, base, w, space, opt, evaluator, g, best, d)) return false;
    if (d < a.fastest_days) a.fastest_days = d, a.fastest_gpus = g;
    if (out) *out = best;
    if (days) *days = d;
    return d <= deadline_days;
  };
  // Doubling: node x 2^k from the peak bound (counts of a power of two nodes take the most
  // layouts) up to one that meets the deadline, the largest count last.
  int failed = a.peak_bound_gpus - node, high = 0;
  int g = node;
  while (g < a.peak_bound_gpus) g *= 2;
  for (g = std::min(g, a.max_gpus);; g = std::min(2 * g, a.max_gpus)) {
    if (meets(g, nullptr, nullptr)) {
      high = g;
      break;
    }
    failed = g;
    if (g >= a.max_gpus) break;
  }
  if (high == 0) return a;
  // Halving the bracket while it spans more than kScan node counts (this assumes the best plan
  // gets no slower with more GPUs at the points it tests); then every node count above the last
  // failure, from below: the first that meets the deadline is the answer.
  constexpr int kScan = 256;
  a.exhaustive = true;
  while ((high - failed) / node > kScan) {
    a.exhaustive = false;
    const int mid = failed + (high - failed) / node / 2 * node;
    (meets(mid, nullptr, nullptr) ? high : failed) = mid;
  }
  for (int c = failed + node; c <= high; c += node) {
    double d = 0;
    Candidate best;
    if (!meets(c, &best, &d)) continue;
    a.found = true;
    a.gpus = c;
    a.best = best;
    a.days = d;
    a.gpu_hours = c * d * 24;
    if (base.profile.usd_per_gpu_hour) a.cost_usd = a.gpu_hours * *base.profile.usd_per_gpu_hour;
    break;
  }
  return a;
}

BudgetAnswer fastest_within_budget(const ModelSpec& m, const Cluster& base, const Workload& w,
                                   const SearchSpace& space, const SearchOptions& opt,
                                   const IEvaluator& evaluator, double budget_gpu_hours,
                                   int max_gpus) {
  BudgetAnswer a;
  const int node = std::max(1, base.profile.node.gpus_per_node);
  a.max_gpus = max_gpus / node * node;
  a.peak_bound_gpu_hours = w.train_tokens * model_flops_per_token(m, w) /
                           base.profile.gpu.peak_flops(w.precision) / 3600;
  if (a.peak_bound_gpu_hours > budget_gpu_hours || a.max_gpus < node) return a;
  // The best plan on `g` GPUs: within the budget (and its figures) or not; no plan is not.
  struct Probe {
    bool within = false;
    Candidate best;
    double days = 0, gpu_hours = 0;
  };
  auto probe = [&](int g) {
    Probe r;
    ++a.counts_searched;
    if (!best_on(m, base, w, space, opt, evaluator, g, r.best, r.days)) return r;
    r.gpu_hours = g * r.days * 24;
    r.within = r.gpu_hours <= budget_gpu_hours;
    return r;
  };
  // Up to 256 node counts: every one. Beyond, GPU-hours do not grow steadily with GPUs: a count
  // that divides the batch and the layout well can train faster within the budget than a
  // smaller one that spends more (GPT-3 175B, 3e11 tokens, 1e6 GPU-hours: 13,312 GPUs over it,
  // 24,576 within it and faster; a new-user trial). So the whole ladder of node x 2^k and node x
  // 3 x 2^(k-1) up to the largest count is probed, not only up to the first count over the
  // budget.
  constexpr int kScan = 256;
  std::vector<int> ladder;
  if (a.max_gpus / node <= kScan)
    for (int g = node; g <= a.max_gpus; g += node) ladder.push_back(g);
  else
    for (long g = node; g <= a.max_gpus; g *= 2) {
      ladder.push_back(static_cast<int>(g));
      if (g >= 2 * node && g / 2 * 3 <= a.max_gpus) ladder.push_back(static_cast<int>(g / 2 * 3));
    }
  if (ladder.empty() || ladder.back() != a.max_gpus) ladder.push_back(a.max_gpus);
  std::sort(ladder.begin(), ladder.end());
  ladder.erase(std::unique(ladder.begin(), ladder.end()), ladder.end());
  std::vector<std::pair<int, Probe>> probed;
  for (int g : ladder) probed.emplace_back(g, probe(g));
  // Every probe: the fastest within the budget.
  auto take = [&](int g, const Probe& r) {
    if (!r.within || (a.found && r.days >= a.days)) return;
    a.found = true;
    a.gpus = g;
    a.best = r.best;
    a.days = r.days;
    a.gpu_hours = r.gpu_hours;
  };
  for (const auto& [g, r] : probed) take(g, r);
  if (!a.found) return a;
  // Then the node counts between the fastest probe and the next rung: every one where they are
  // at most 256 node counts apart; otherwise the bracket is halved first, towards the budget's
  // edge when the next rung is over it (`exhaustive` false: that step assumes GPU-hours grow
  // with GPUs between the two).
  int within = a.gpus;
  const auto next = std::upper_bound(ladder.begin(), ladder.end(), within);
  int over = next == ladder.end() ? a.max_gpus + node : *next;
  const bool next_over =
      next != ladder.end() && !probed[static_cast<size_t>(next - ladder.begin())].second.within;
  if (next_over) {
    while ((over - within) / node > kScan) {
      const int mid = within + (over - within) / node / 2 * node;
      probed.emplace_back(mid, probe(mid));
      take(mid, probed.back().second);
      (probed.back().second.within ? within : over) = mid;
    }
  } else if ((over - within) / node > kScan) {
    over = within + kScan * node;
  }
  for (int g = within + node; g < over && g <= a.max_gpus; g += node) take(g, probe(g));
  // Every count is probed once (the rungs, the halving points and the scan do not overlap).
  a.exhaustive = a.counts_searched >= a.max_gpus / node;
  if (a.found && base.profile.usd_per_gpu_hour)
    a.cost_usd = a.gpu_hours * *base.profile.usd_per_gpu_hour;
  return a;
}

}  // namespace dtplan
