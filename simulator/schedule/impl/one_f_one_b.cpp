// 1F1B / PipeDream-Flush (Narayanan et al. 2021 §2.2): bubble (p-1)(F+B); stage i holds
// p - i micro-batches (Megatron get_pp_rank_microbatches warm-up + 1), at most m.
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/schedule/order_timing.h"

namespace dtplan {
namespace {
using enum ScheduleTask::Pass;  // kF, kB, kW, ... (unity builds: one name in every file)
class OneFOneB final : public IPipelineSchedule {
 public:
  std::vector<ScheduleTask> task_order(int s, int p, int, int m) const override {
    std::vector<ScheduleTask> t;
    const int warm = std::min(p - s - 1, m);
    int f = 0, b = 0;
    for (; f < warm; ++f) t.push_back({kF, f, 0});
    for (ScheduleTask& k : t) k.serial = true;
    while (f < m) {
      t.push_back({kF, f++, 0});
      t.push_back({kB, b++, 0});
    }
    t.back().serial = true;  // the last steady backward sends alone, then receives
    while (b < m) {
      t.push_back({kB, b++, 0});
      t.back().serial = true;
    }
    return t;
  }
  bool rendezvous_sends() const override { return true; }
  // The step is the longest path through some rank j (t_i = F_i + B_i + W_i, R_j = sum_{i>j}
  // t_i the round trip through the ranks after it): the fill and drain through the ranks
  // before it, its m micro-batches, and what its warm-up hides of the round trip. With
  // m >= p, max_j [sum_{i<j} t_i + m t_j + max(0, R_j - (p-j-1) F_j) + max(0, R_j - (p-j-1)
  // (B_j + W_j))]: its first backward waits for the round trip less its p-j-1 warm-up forwards,
  // its last for the same less its p-j-1 cool-down backwards (in the steady state a round
  // trip hides behind a forward and a backward). With m < p, max_j [sum_{i<j} t_i + m t_j +
  // max(0, R_j - min(p-j-1, m-1) F_j)]. Both equal m t_max + (sum of t_i - t_max) when the
  // last rank is the slowest, and (m + p - 1) t for equal stages [derived from the order
  // below; within 1% of its timeline with the embedding and head on the end ranks, uneven
  // splits (a heavier interior, where m t_max + sum - t_max overstated the step by up to
  // 1.3%) and exchanges: SchedulePlugins.OneFOneBFollowsItsOrder, StepCostsProperty].
  // Rank i's last backward ends the backward passes and sends of the ranks before it earlier
  // than rank 0's, the step's last task; its window is a micro-batch's whole backward, which
  // the bucketed gradient reduction overlaps.
  PipelineTime time(const PipelineInput& in) const override {
    // With fewer micro-batches than stages and an uneven split, a rank's backwards can wait for
    // a slower later rank's, which the m < p form misses (1.03% short on a Qwen3 235B plan, p 16,
    // m 8: StepCostsProperty, 2026-12-02); its order's timeline costs O(p m) < O(p^2) there.
    if (in.m < in.p && in.uneven_split) return time_task_order(*this, in);
    PipelineTime t;
    double sum = 0, t_max = 0, before = 0;
    for (int i = 0; i < in.p; ++i) {
      const double ti = in.f[i] + in.b[i] + in.w[i];
      sum += ti;
      t_max = std::max(t_max, ti);
    }
    const double t_last = in.f[in.p - 1] + in.b[in.p - 1] + in.w[in.p - 1];
    // The last rank the slowest: the path through it, m t_max + (sum - t_max), is the longest.
    const bool last_slowest = in.m >= in.p && t_last >= t_max;
    if (last_slowest) t.total_s = in.m * t_max + (sum - t_max);
    for (int j = 0; j < in.p && !last_slowest; ++j) {
      const double tj = in.f[j] + in.b[j] + in.w[j];
      const double after = sum - before - tj;  // the round trip through the ranks after j
      double path = before + in.m * tj;
      if (in.m >= in.p) {
        // Rank j's first backward waits for the round trip less its p-j-1 warm-up forwards;
        // its last for the same round trip less its p-j-1 cool-down backwards.
        path += std::max(0.0, after - (in.p - j - 1) * in.f[j]) +
                std::max(0.0, after - (in.p - j - 1) * (in.b[j] + in.w[j]));
      } else {
        path += std::max(0.0, after - std::min(in.p - j - 1, in.m - 1) * in.f[j]);
      }
      t.total_s = std::max(t.total_s, path);
      before += tj;
    }
    t.bubble_s = std::max(0.0, t.total_s - in.m * t_max);
    // The last backward wave: rank i's pass (b_i + w_i less the exchanges charged inside it),
    // then its send to rank i - 1.
    before = 0;
    for (int i = 0; i < in.p; ++i) {
      const double sends = in.p > 1 ? pipeline_exchanges_per_pass(i, in.p, in.v) * in.p2p_s : 0.0;
      const double pass = in.b[i] + in.w[i] - sends;
      const double end = t.total_s - before;
      if (in.rank_end_s) in.rank_end_s[i] = end;
      if (in.rank_grad_start_s) in.rank_grad_start_s[i] = end - pass;
      before += pass + in.p2p_s;
    }
    return t;
  }
  double inflight_microbatches(int stage, int p, int, int m) const override {
    return std::min<double>(m, p - stage);
  }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, OneFOneB, "1f1b",
                "one forward one backward (PipeDream-Flush), bubble (p-1)(F+B)")
}  // namespace dtplan
