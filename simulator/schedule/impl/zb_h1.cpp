// ZB-H1 (Qi et al., ICLR 2024; sail-sg/zero-bubble README): weight gradients fill the bubble,
// which becomes (p-1)(F + B - W) with B the input-gradient pass; memory as 1F1B.
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
class ZbH1 final : public IPipelineSchedule {
 public:
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
