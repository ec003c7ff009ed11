// ZB-H1 (Qi et al., ICLR 2024; sail-sg/zero-bubble README): weight gradients fill the bubble,
// which becomes (p-1)(F + B - W) with B the input-gradient pass; memory as 1F1B.
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
using enum ScheduleTask::Pass;  // kF, kB, kW, ... (unity builds: one name in every file)
class ZbH1 final : public IPipelineSchedule {
 public:
  const char* bubble_formula() const override {
    return "sum over ranks but the slowest of (F_i + B_i - f W_i), f = min(m-1, p-1)/(p-1): the "
           "deferred weight gradients fill the rest";
  }
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
  // time(): the order's timeline (the default). With equal stages and m >= p it is the
  // paper's (p-1)(F + B - W) for W <= F; with fewer micro-batches than ranks only m - 1 of the
  // p - 1 slots get a W, (p-1)(F+B) - min(m-1, p-1) W; unequal stages (the embedding, the
  // head) and exchanges shift both, which no short form follows [measured on the timeline].
  double inflight_microbatches(int stage, int p, int, int m) const override {
    return std::min<double>(m, p - stage);
  }
};
}  // namespace
DTPLAN_REGISTER(IPipelineSchedule, ZbH1, "zb-h1",
                "zero-bubble H1: bubble (p-1)(F+B-W), 1F1B memory")
}  // namespace dtplan
