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
#include <stdexcept>
#include <vector>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
using enum ScheduleTask::Pass;  // kF, kB, kW, ... (unity builds: one name in every file)

// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024), built as the
// handcrafted ZB-V order of sail-sg/zero-bubble-pipeline-parallelism
// (megatron/core/pipeline_parallel/handcrafted_zb_v): rank s runs
//   warm-up   2(p-s)-1 F0, then s x (F1 F0), then (p-s) x (F1 B1 W1);
//   steady    (F0 B0 W0 F1 B1 W1) until every forward has run;
//   cool-down s x (B0 B1), (p-s) x (B0 W), then the deferred W of chunk 1, then of chunk 0;
// the cool-down's W are the ones deferred into the slots where rank s would wait for
// gradients. The order is written for max(m, 2p-1) micro-batches and the passes of those past
// m are dropped, as the repository does for small m. Every rank holds at most 2p chunk
// activations (1F1B's p micro-batches). With F = B = W per chunk every rank runs without idling
// from its first forward (at s x F) to its end, so the step is 6m chunk-passes + (p-1) F: the
// paper's zero bubble is this idle-free span per rank, which back-to-back steps tile when the
// optimizer step is not synchronized across ranks (the paper's post-validation); one
// synchronized step still pays the (p-1) F fill. The repository's greedy (scheduler/zbv.py)
// finds the same step time when F <= B <= 2W in our checks and a shorter one otherwise (by up
// to a third of the bubble, for F:B:W = 2:1:1).
std::vector<ScheduleTask> zb_v_order(int s, int p, int m) {
  const int n = std::max(m, 2 * p - 1);
  std::vector<ScheduleTask> t;
  t.reserve(6 * static_cast<size_t>(n));
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  for (int i = 0; i < 2 * (p - s) - 1; ++i) t.push_back({kF, f0++, 0});
  for (int i = 0; i < s; ++i) {
    t.push_back({kF, f1++, 1});
    t.push_back({kF, f0++, 0});
  }
  for (int i = 0; i < p - s; ++i) {
    t.push_back({kF, f1, 1});
    t.push_back({kB, b1, 1});
    t.push_back({kW, b1, 1});
    ++f1, ++b1;
  }
  while (f1 < f0 || f0 < n) {
    if (f0 < n) t.push_back({kF, f0++, 0});
    t.push_back({kB, b0, 0});
    t.push_back({kW, b0++, 0});
    t.push_back({kF, f1++, 1});
    t.push_back({kB, b1, 1});
    t.push_back({kW, b1++, 1});
  }
  int w0 = b0, w1 = b1;
  for (int i = 0; i < s; ++i) {
    t.push_back({kB, b0++, 0});
    t.push_back({kB, b1++, 1});
  }
  for (int i = 0; i < p - s; ++i) {
    t.push_back({kB, b0++, 0});
    t.push_back({kW, w0++, 0});
  }
  while (w1 < b1) t.push_back({kW, w1++, 1});
  while (w0 < b0) t.push_back({kW, w0++, 0});
  std::erase_if(t, [m](const ScheduleTask& k) { return k.mb >= m; });
  return t;
}

class ZbV final : public IPipelineSchedule {
 public:
  const char* bubble_formula() const override {
    return "sum over ranks but the slowest of max(F_i, B_i + max(0, B_i - 2W_i)) / 2 (the V's "
           "chunk-level fill)";
  }
  std::vector<ScheduleTask> task_order(int s, int p, int v, int m) const override {
    if (v != 2) throw std::invalid_argument("the V schedules run two chunks per rank (v = 2)");
    return zb_v_order(s, p, m);
  }
  bool splits_weight_gradients() const override { return true; }
  // time(): the order's timeline (the default). With equal stages and m >= 2p - 1 each rank's
  // fill is max(F, B + max(0, B - 2W)) / 2 (a chunk's); fewer micro-batches cannot fill it
  // (1F1B's (p-1)(F+B) at m = 1); unequal stages and exchanges shift it [measured].
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
