// 1F1B / PipeDream-Flush (Narayanan et al. 2021 §2.2): bubble (p-1)(F+B); stage i holds
// p - i micro-batches (Megatron get_pp_rank_microbatches warm-up + 1), at most m.
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
class OneFOneB final : public IPipelineSchedule {
 public:
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
