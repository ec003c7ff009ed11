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
  PipelineTime time(const PipelineInput& in) const override {
    return pipeline_time_with_bubble(in, 1.0);
  }
  double inflight_microbatches(int stage, int p, int, int m) const override {
    return std::min<double>(m, p - stage);
  }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, OneFOneB, "1f1b",
                "one forward one backward (PipeDream-Flush), bubble (p-1)(F+B)")
}  // namespace dtplan
