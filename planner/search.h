// Exhaustive search over parallel layouts: every factorization of the GPUs into tp x pp x cp x dp
// (ep and etp carved from the data x context grid for MoE), virtual stages, ZeRO stage,
// recomputation, micro-batch size and pipeline schedule; each rejected plan is counted under a
// named reason; the survivors are evaluated through an IEvaluator and ranked.
//
// Contract: deterministic: the ranked top K and the Pareto front do not depend on the thread
// count (ties broken by a total order on plans) nor on pruning, which only skips plans that
// cannot fit, or that can enter neither the top K nor the Pareto front (each worker prunes
// against its own K-th best and front, so how many plans are pruned rather than evaluated
// depends on the thread count). Memory: each worker holds its top K and its Pareto front, never
// the space.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "planner/frameworks.h"
#include "planner/i_evaluator.h"

namespace dtplan {

// Allowed values per dimension; an empty list means "every feasible value".
struct SearchSpace {
  std::vector<int> tp, pp, cp, ep, etp, vpp, mbs, zero;
  std::vector<Recompute> recompute;
  std::vector<std::string> schedules;
  std::optional<bool> sp;  // unset: SP exactly when tp > 1 (Megatron's practice)
  // Global batches (sequences per step); empty: the workload's. With more than one, step time
  // and cost are ranked per token (the Pareto front too): a larger batch takes longer per step.
  std::vector<int64_t> gbs;
};

enum class Objective { kStepTime, kCost, kMfu, kMemory };
const std::vector<std::string>& objective_names();

struct SearchOptions {
  Objective objective = Objective::kStepTime;
  int top_k = 10;
  double memory_margin = 0.10;  // keep 10% of HBM free for fragmentation and NCCL growth
  Framework framework = Framework::kMegatron;
  bool framework_rules = true;  // false: a framework profile of its own trainer (no rules)
  // The plan fields no search dimension sets (overlaps, ZeRO-3 gathers, gradient precision,
  // the attention kernel): every candidate starts from it, as a framework profile's defaults
  // leave it (core/framework_profile.h). TP-communication overlap applies only with SP.
  Plan base_plan;
  bool allow_cross_node_tp = false;
  int threads = 0;  // 0: hardware concurrency
  int max_mbs = 16;
  // Skip plans whose floor (IEvaluator::step_time_floor, peak_memory) shows they can enter
  // neither the top K nor the Pareto front; the results are the same without.
  bool prune = true;
  // Called now and then from one search thread with the share of layouts done (0..1).
  std::function<void(double)> progress;
};

enum class Rejection {
  kWorldSize,       // tp*pp*cp does not divide the GPUs
  kDivisibility,    // heads, layers, experts, batch, sequence
  kCrossNodeTp,     // TP larger than the NVLink domain
  kFramework,       // the framework cannot express it
  kMemoryStates,    // weights + grads + optimizer alone exceed the budget (whole sub-space)
  kMemory,          // does not fit with activations
  kCannotBeatTopK,  // fits, but its floor is behind the current K-th best and Pareto front
  kDeviceGroups,    // a pipeline stage spans two device groups (heterogeneous cluster)
  kInvalid,         // any other validation failure
};
inline constexpr int kNumRejections = 9;
const char* describe(Rejection r);

struct Candidate {
  Plan plan;  // plan.gbs is its global batch
  Estimate estimate;
  double objective = 0;  // smaller is better (MFU is negated); per token when SearchResult says
  bool refined = false;  // re-evaluated by refine_top's evaluator
};

struct SearchResult {
  std::vector<Candidate> top;     // best first
  std::vector<Candidate> pareto;  // step time vs peak memory, by step time
  std::array<long, kNumRejections> rejected{};
  std::array<std::string, kNumRejections> example{};  // one example reason per kind
  long enumerated = 0;
  long evaluated = 0;
  long feasible = 0;
  bool exhausted = true;
  // More than one global batch searched: step time and cost are ranked per token, and the Pareto
  // front is time per token vs peak memory.
  bool per_token = false;
  double elapsed_s = 0;
  int threads = 1;
  double plans_per_s() const { return elapsed_s > 0 ? enumerated / elapsed_s : 0; }
};

// Why a search found no feasible plan, in one line: the commonest rejection with its count and
// an example, or, when nothing was enumerated, that no layout takes the pinned values.
std::string why_no_plan(const SearchResult& r);

SearchResult search(const ModelSpec& m, const Cluster& c, const Workload& w,
                    const SearchSpace& space, const SearchOptions& opt,
                    const IEvaluator& evaluator);

// The value a candidate is ranked by (smaller is better): step time, cost, -MFU or peak memory;
// step time and cost divided by the step's tokens when `per_token`.
double objective_value(const Estimate& e, Objective o, const Cluster& c, double tokens,
                       bool per_token);

// Reorders r.top: the best plan of each distinct layout (tp, pp, cp, ep, ZeRO stage,
// recomputation) first, in rank order, then the others in rank order; keeps `k` at most. The
// near-duplicates (the same layout with another micro-batch, schedule or vpp, within a fraction
// of a percent) come after the alternatives a reader wants to compare. Run the search with a
// larger top_k first (say 8k) so that there are layouts to choose from.
void distinct_layouts_first(SearchResult& r, size_t k);

// Re-evaluates the first `k` ranked plans with another evaluator (e.g. the simulator) and
// re-ranks them by the same objective; the rest keep their places after them. Each plan is
// evaluated with its own global batch (plan.gbs).
void refine_top(SearchResult& r, const ModelSpec& m, const Cluster& c, const Workload& w,
                const SearchOptions& opt, const IEvaluator& precise, int k);

}  // namespace dtplan
