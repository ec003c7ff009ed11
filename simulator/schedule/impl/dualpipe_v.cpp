// DualPipeV (deepseek-ai/DualPipe README): p ranks, two chunks each; bubble
// (PP/2 - 1)(F&B + B - 3W) with PP = 2p chunk-stages and chunk times half of a rank's, taking
// F&B = F + B (no compute/communication overlap credit here) [derived]; each rank holds
// PP + 1 chunk activations = p + 1/2 rank-level micro-batches.
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
class DualPipeV final : public IPipelineSchedule {
 public:
  PipelineTime time(const PipelineInput& in) const override {
    double f = 0, b = 0, w = 0;
    for (int i = 0; i < in.p; ++i) f += in.f[i], b += in.b[i], w += in.w[i];
    const double full = f + b + w;
    // (p-1) chunk-slots of (F_c + 2B_c - 3W_c) with chunk = rank/2, B here = b + w.
    const double per_rank = 0.5 * std::max(0.0, f + 2 * (b + w) - 3 * w);
    const double scale = full > 0 ? per_rank / full : 1.0;
    return pipeline_time_with_bubble(in, scale);
  }
  bool accepts_chunks(int v) const override { return v == 2; }
  const char* chunks_rule() const override { return "vpp must be 2 (two chunks per rank in a V)"; }
  double inflight_microbatches(int, int p, int, int m) const override {
    return std::min<double>(m, p + 0.5);
  }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, DualPipeV, "dualpipe-v",
                "DualPipeV: 2 chunks per rank in a V, bubble (p/2-1)(F&B+B-3W)")
}  // namespace dtplan
