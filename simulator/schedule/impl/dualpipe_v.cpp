// DualPipeV (deepseek-ai/DualPipe README): p ranks, two chunks each; bubble
// (PP/2 - 1)(F&B + B - 3W) with PP = 2p chunk-stages and chunk times half of a rank's, taking
// F&B = F + B (no compute/communication overlap credit here) [derived]; each rank holds
// PP + 1 chunk activations = p + 1/2 rank-level micro-batches. The simulator's DualPipeV order
// (dualpipev.py's eight phases, simulator/des/pipeline_sim.cpp) gives exactly this bubble with
// equal passes (tests/unit/simulator/pipeline_sim_test.cpp); unequal ones can differ (chunk
// passes F:B:W = 1:2:1 idle one F less than this form, 2:1:1 idle (p-1)(F-B) more).
// Memory [derived from that order]: rank s runs min(m, 2p-s-1) chunk-0 and min(m, s+1) chunk-1
// forwards before its first backward, then one more forward (alongside the first backward in
// an overlapped pair) if micro-batches remain: 2p + 1 chunks for m >= 2p, which dualpipev.py
// requires; the simulator also runs fewer micro-batches (the order for 2p, the missing ones
// dropped), where the count is smaller than min(m, p + 1/2) on the lower ranks.
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
  bool v_shape() const override { return true; }
  double inflight_microbatches(int stage, int p, int, int m) const override {
    const int warm = std::min(m, 2 * p - stage - 1) + std::min(m, stage + 1);
    return (warm + (m > 2 * p - stage - 1 ? 1 : 0)) / 2.0;
  }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, DualPipeV, "dualpipe-v",
                "DualPipeV: 2 chunks per rank in a V, bubble (p/2-1)(F&B+B-3W)")
}  // namespace dtplan
