// ZB-H1 (Qi et al., ICLR 2024; sail-sg/zero-bubble README): weight gradients fill the bubble,
// which becomes (p-1)(F + B - W) with B the input-gradient pass; memory as 1F1B.
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
constexpr ScheduleTask::Pass kF = ScheduleTask::kF, kB = ScheduleTask::kB, kW = ScheduleTask::kW;
class ZbH1 final : public IPipelineSchedule {
 public:
  std::vector<ScheduleTask> task_order(int s, int p, int, int m) const override {
    std::vector<ScheduleTask> t;
    // ZB-H1 (Qi et al., ICLR 2024): in step x rank s runs F(x), B(x - (p-1-s)) and
    // W(x - (p-1)), each when its index is a micro-batch. The warm-up forwards and the
    // activations held are 1F1B's; deferring W by p-1 steps fills the bubble, which becomes
    // (p-1)(F + B - W) for m >= p and W <= F.
    for (int x = 0; x < m + p - 1; ++x) {
      const int b = x - (p - 1 - s), w = x - (p - 1);
      if (x < m) t.push_back({kF, x, 0});
      if (b >= 0 && b < m) t.push_back({kB, b, 0});
      if (w >= 0 && w < m) t.push_back({kW, w, 0});
    }
    return t;
  }
  bool splits_weight_gradients() const override { return true; }
  PipelineTime time(const PipelineInput& in) const override {
    double f = 0, b = 0, w = 0;
    for (int i = 0; i < in.p; ++i) f += in.f[i], b += in.b[i], w += in.w[i];
    const double full = f + b + w;
    const double scale = full > 0 ? std::max(0.0, f + b - w) / full : 1.0;
    return pipeline_time_with_bubble(in, scale);
  }
  double inflight_microbatches(int stage, int p, int, int m) const override {
    return std::min<double>(m, p - stage);
  }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, ZbH1, "zb-h1",
                "zero-bubble H1: bubble (p-1)(F+B-W), 1F1B memory")
}  // namespace dtplan
