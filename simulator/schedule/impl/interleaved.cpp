// Interleaved 1F1B (Narayanan et al. 2021 §2.2.2): v chunks per rank cut the bubble to
// (p-1)(F+B)/v. Stage i warms up 2(p-i-1) + (v-1)p + 1 chunk-micro-batches of L/(pv) layers
// (Megatron schedules.py), i.e. p + (p-1)/v micro-batches on stage 0 (REFERENCE.md §2.2).
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
class Interleaved final : public IPipelineSchedule {
 public:
  PipelineTime time(const PipelineInput& in) const override {
    return pipeline_time_with_bubble(in, 1.0 / in.v);
  }
  bool accepts_chunks(int v) const override { return v >= 2; }
  const char* chunks_rule() const override { return "vpp must be >= 2"; }
  // Megatron-LM's interleaved schedule asserts that the micro-batches divide into groups of p
  // ("number of microbatches is not divisible by pipeline-parallel size when using
  // interleaved schedule", schedules.py).
  bool accepts_microbatches(int p, int, int m) const override { return m % p == 0; }
  const char* microbatches_rule() const override {
    return "the number of micro-batches (gbs / (dp x mbs)) must be a multiple of pp";
  }
  double inflight_microbatches(int stage, int p, int v, int m) const override {
    const double chunks = 2.0 * (p - stage - 1) + (v - 1.0) * p + 1.0;
    return std::min<double>(m, chunks / v);
  }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, Interleaved, "interleaved",
                "interleaved 1F1B with v virtual stages, bubble (p-1)(F+B)/v")
}  // namespace dtplan
