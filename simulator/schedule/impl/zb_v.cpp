// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024; sail-sg
// zero-bubble README): two chunks per rank in a V. The paper's near-zero bubble for equal
// F/B/W is the idle time inside each rank's own span; back-to-back steps tile those spans only
// when the optimizer step is not synchronized across ranks (its post-validation). A dtplan
// step is synchronized (as for every other schedule), so it also pays the pipeline fill: the
// last rank's first input arrives (p-1) chunk forwards late, which no order avoids. With the
// ZB-V order the simulator runs (sail-sg's handcrafted ZB-V, simulator/des/pipeline_sim.cpp)
// the bubble per chunk is (p-1) x max(F, B + max(0, B - 2W)) for m >= 2p: (p-1) F with equal
// passes [derived: hand-worked timeline in tests/unit/simulator/pipeline_sim_test.cpp], and
// exactly the simulated one for F <= B [measured with the simulator, chunk F:B:W from 1:1:0.2
// to 1:3:1, p = 4..16]; for F > B the order idles more than this form (F:B:W = 2:1:1 about
// (p-1)(2F - B) at large p). Chunk times are half the rank-level ones. The
// earlier form here, (p-1)(F+B-2W)/2 per rank, read the paper's per-rank figure as the step's
// bubble and was 0 with equal passes.
// Memory: rank s holds min(m, 2p-s-1) chunk-0 and min(m, s+1) chunk-1 forwards when its first
// backward starts, its peak: p micro-batches (1F1B's) for m >= 2p-1, fewer below.
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
    const double per_chunk = std::max(f, b + std::max(0.0, b - 2 * w)) / 2;
    const double scale = full > 0 ? per_chunk / full : 1.0;
    return pipeline_time_with_bubble(in, scale);
  }
  bool accepts_chunks(int v) const override { return v == 2; }
  const char* chunks_rule() const override { return "vpp must be 2 (two chunks per rank in a V)"; }
  bool v_shape() const override { return true; }
  double inflight_microbatches(int stage, int p, int, int m) const override {
    return (std::min(m, 2 * p - stage - 1) + std::min(m, stage + 1)) / 2.0;
  }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, ZbV, "zb-v",
                "zero-bubble V: 2 chunks per rank, bubble (p-1)F/2 if F=B=W, 1F1B memory")
}  // namespace dtplan
