// ZB-V (Qi et al. 2024, zero-bubble README): two chunks per rank in a V; bubble close to zero
// when F = B = W; we take (p-1) x max(0, F + B - 2W) / 2 per rank-level times [derived from
// the ZB-H2 form on half-size chunks], with 1F1B's peak memory on every rank.
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
class ZbV final : public IPipelineSchedule {
 public:
  PipelineTime time(const PipelineInput& in) const override {
    double f = 0, b = 0, w = 0;
    for (int i = 0; i < in.p; ++i) f += in.f[i], b += in.b[i], w += in.w[i];
    const double full = f + b + w;
    const double scale = full > 0 ? 0.5 * std::max(0.0, f + b - 2 * w) / full : 1.0;
    return pipeline_time_with_bubble(in, scale);
  }
  bool accepts_chunks(int v) const override { return v == 2; }
  const char* chunks_rule() const override { return "vpp must be 2 (two chunks per rank in a V)"; }
  double inflight_microbatches(int, int p, int, int m) const override {
    return std::min<double>(m, p);
  }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, ZbV, "zb-v",
                "zero-bubble V schedule: 2 chunks per rank, near-zero bubble")
}  // namespace dtplan
