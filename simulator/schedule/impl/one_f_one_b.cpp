// 1F1B / PipeDream-Flush (Narayanan et al. 2021 §2.2): bubble (p-1)(F+B); stage i holds
// p - i micro-batches (Megatron get_pp_rank_microbatches warm-up + 1), at most m.
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
constexpr ScheduleTask::Pass kF = ScheduleTask::kF, kB = ScheduleTask::kB;
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
  // With m >= p micro-batches: m t_max + (sum of t_i - t_max). With fewer, a rank's warm-up
  // forwards hide part of the round trip through the ranks after it: the step is the longest
  // path through some rank j, max_j [sum_{i<j} t_i + m t_j + max(0, sum_{i>j} t_i -
  // min(p-j-1, m-1) F_j)] (t_i = F_i + B_i + W_i) [derived from the order below; equal to its
  // timeline for equal stages, within 1% of it with the embedding and head on the end ranks,
  // uneven splits and exchanges: SchedulePlugins.OneFOneBFollowsItsOrder, StepCostsProperty].
  // Rank i's last backward ends the backward passes and sends of the ranks before it earlier
  // than rank 0's, the step's last task; its window is a micro-batch's whole backward, which
  // the bucketed gradient reduction overlaps.
  PipelineTime time(const PipelineInput& in) const override {
    PipelineTime t;
    if (in.m >= in.p) {
      t = pipeline_time_with_bubble(in, 1.0);
    } else {
      double sum = 0, t_max = 0;
      for (int i = 0; i < in.p; ++i) sum += in.f[i] + in.b[i] + in.w[i];
      double before = 0;
      for (int j = 0; j < in.p; ++j) {
        const double tj = in.f[j] + in.b[j] + in.w[j];
        const double after = sum - before - tj;
        const double hidden = std::min(in.p - j - 1, in.m - 1) * in.f[j];
        t.total_s = std::max(t.total_s, before + in.m * tj + std::max(0.0, after - hidden));
        t_max = std::max(t_max, tj);
        before += tj;
      }
      t.bubble_s = std::max(0.0, t.total_s - in.m * t_max);
    }
    // The last backward wave: rank i's pass (b_i + w_i less the exchanges charged inside it),
    // then its send to rank i - 1.
    double before = 0;
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
