// GPipe (Huang et al. 2019): all forwards, then all backwards. Same bubble as 1F1B,
// (p-1) x (F+B), but every stage holds all m micro-batches (REFERENCE.md §4). Its time is its
// order's timeline (the default time()): with exchanges, each forward and backward phase
// fills on its own, which the 1F1B form undercharges by up to 8% [measured on the timeline].
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
using enum ScheduleTask::Pass;  // kF, kB, kW, ... (unity builds: one name in every file)
class GPipe final : public IPipelineSchedule {
 public:
  std::vector<ScheduleTask> task_order(int, int, int, int m) const override {
    std::vector<ScheduleTask> t;
    t.reserve(2 * static_cast<size_t>(m));
    for (int i = 0; i < m; ++i) t.push_back({kF, i, 0});
    for (int i = 0; i < m; ++i) t.push_back({kB, i, 0});
    return t;
  }
  bool rendezvous_sends() const override { return true; }
  double inflight_microbatches(int, int, int, int m) const override { return m; }
  // Every forward runs before the first backward: all m losses' logits are alive at once.
  double loss_inflight_microbatches(int, int, int m) const override { return m; }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, GPipe, "gpipe",
                "all forwards then all backwards; holds m micro-batches")
}  // namespace dtplan
