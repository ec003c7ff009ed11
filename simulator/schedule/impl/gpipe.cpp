// GPipe (Huang et al. 2019): all forwards, then all backwards. Same bubble as 1F1B,
// (p-1) x (F+B), but every stage holds all m micro-batches (REFERENCE.md §4).
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
class GPipe final : public IPipelineSchedule {
 public:
  PipelineTime time(const PipelineInput& in) const override {
    return pipeline_time_with_bubble(in, 1.0);
  }
  double inflight_microbatches(int, int, int, int m) const override { return m; }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, GPipe, "gpipe",
                "all forwards then all backwards; holds m micro-batches")
}  // namespace dtplan
