// Time-to-train inverted: the fewest GPUs whose best plan trains a token count within a
// deadline, on the cluster's node granularity.
#pragma once

#include <optional>
#include <string>

#include "planner/search.h"

namespace dtplan {

struct DeadlineAnswer {
  bool found = false;
  int gpus = 0;          // the fewest GPUs that meet the deadline (a multiple of the node size)
  Candidate best;        // the best plan on them (plan.gbs its global batch)
  double days = 0;       // its time to train
  double gpu_hours = 0;  // gpus x days x 24
  std::optional<double> cost_usd;  // with the profile's price per GPU-hour
  int peak_bound_gpus = 0;         // fewest GPUs at 100% MFU: no count below can meet the deadline
  int counts_searched = 0;         // GPU counts whose search ran
  int max_gpus = 0;                // the largest count considered
  // Every node count from the peak bound (or the last count that failed) to the answer was
  // searched; false when the bracket was first halved (docs: fewest_gpus_for_deadline).
  bool exhaustive = false;
  // Not found: the fastest seen, for the message.
  int fastest_gpus = 0;
  double fastest_days = 0;
};

// The fewest GPUs, in node steps, whose best plan (the search's, by `opt.objective`) trains
// `w.train_tokens` within `deadline_days`. No count below the peak bound (every FLOP at 100% of
// the peak) can; from there, counts of node x 2^k double until one meets the deadline; the
// bracket above the last that failed is halved while it spans more than 256 node counts
// (assuming more GPUs never make the best plan slower at the halving points: `exhaustive` says
// whether it was), then every node count of it is searched from below, and the first that meets
// the deadline is the answer. Each count's plan is ranked by step time (opt.objective aside).
// `base` gives the profile; counts go up to `max_gpus`. Requires w.train_tokens > 0.
DeadlineAnswer fewest_gpus_for_deadline(const ModelSpec& m, const Cluster& base, const Workload& w,
                                        const SearchSpace& space, const SearchOptions& opt,
                                        const IEvaluator& evaluator, double deadline_days,
                                        int max_gpus);

// The fastest training of `w.train_tokens` within a budget of GPU-hours (GPUs x days x 24), on
// whole nodes: more GPUs train faster but, as efficiency falls, spend more GPU-hours, and not
// steadily (a count that divides the layout well can beat a smaller one on both).
// Up to 256 node counts every one is probed; beyond, every rung of node x 2^k and node x 3 x
// 2^(k-1) up to `max_gpus`, then the node counts between the fastest rung within the budget and
// the next rung: each of them where they are at most 256 node counts apart, else after halving
// that bracket towards the budget's edge. `exhaustive` says whether every node count up to
// `max_gpus` was probed. Each count's plan is ranked by step time. No count can train within
// less than the 100%-MFU bound (tokens x FLOPs per token / peak).
struct BudgetAnswer {
  bool found = false;
  int gpus = 0;
  Candidate best;
  double days = 0, gpu_hours = 0;
  std::optional<double> cost_usd;
  double peak_bound_gpu_hours = 0;  // at 100% MFU, on any count
  int counts_searched = 0;
  int max_gpus = 0;
  bool exhaustive = false;
};
BudgetAnswer fastest_within_budget(const ModelSpec& m, const Cluster& base, const Workload& w,
                                   const SearchSpace& space, const SearchOptions& opt,
                                   const IEvaluator& evaluator, double budget_gpu_hours,
                                   int max_gpus);

}  // namespace dtplan
