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
#include <stdexcept>
#include <vector>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {
namespace {
using enum ScheduleTask::Pass;  // kF, kB, kW, ... (unity builds: one name in every file)

// DualPipeV (deepseek-ai/DualPipe, dualpipe/dualpipev.py, DualPipeV.step): rank s of p, n
// micro-batches, in eight phases
//   1  2(p-s-1) x F0            2  (s+1) x (F0 F1)           3  (p-s-1) x (B1 W F1)
//   4  (n-2p+s+1) x (F0&B1, F1&B0), on the last rank the first F0&B1 as F0 then B1
//   5  (p-s-1) x (B1, F1&B0)    6  (s+1) x (B1 B0), the later half with W deferred
//   7  (p-s-1) x (W B0)         8  (s+1) x W
// where "F&B" is an overlapped pair (one task here, F + B + W long: no overlap credit), B
// without a following W in the list is the whole backward (kBW), and W runs the oldest
// deferred weight gradients (the code's FIFO WeightGradStore). dualpipev.py needs n >= 2p; for
// fewer micro-batches we lay out n = 2p and drop the passes of micro-batches past m (a pair
// losing one half becomes the other half alone), which keeps the order free of deadlock
// because no kept pass depends on a dropped one.
std::vector<ScheduleTask> dualpipe_v_order(int s, int p, int m) {
  const int n = std::max(m, 2 * p);
  std::vector<ScheduleTask> t;
  int f[2] = {0, 0}, b[2] = {0, 0};
  std::vector<ScheduleTask> deferred;  // weight gradients not yet run, oldest first
  size_t next_w = 0;
  auto fwd = [&](int c) { t.push_back({kF, f[c]++, c}); };
  auto bwd = [&](int c, bool split) {
    if (split) {
      t.push_back({kB, b[c], c});
      deferred.push_back({kW, b[c], c});
    } else {
      t.push_back({kBW, b[c], c});
    }
    ++b[c];
  };
  auto wgt = [&] { t.push_back(deferred[next_w++]); };
  auto pair = [&](int cf, int cb) {
    ScheduleTask k{kFB, f[cf]++, cf};
    k.mb2 = b[cb]++;
    k.chunk2 = cb;
    t.push_back(k);
  };
  const bool last = s == p - 1;
  for (int i = 0; i < 2 * (p - s - 1); ++i) fwd(0);
  for (int i = 0; i < s + 1; ++i) fwd(0), fwd(1);
  for (int i = 0; i < p - s - 1; ++i) bwd(1, true), wgt(), fwd(1);
  for (int i = 0; i < n - 2 * p + s + 1; ++i) {
    if (i == 0 && last)
      fwd(0), bwd(1, false);
    else
      pair(0, 1);
    pair(1, 0);
  }
  for (int i = 0; i < p - s - 1; ++i) bwd(1, false), pair(1, 0);
  // Phase 6: the weight gradients are deferred from the middle pass on (after B1 of the
  // middle step on even ranks, before it on odd ones), as dualpipev.py does.
  const int n6 = s + 1;
  bool split = false;
  for (int i = 0; i < n6; ++i) {
    if (i == n6 / 2 && s % 2 == 1) split = true;
    bwd(1, split);
    if (i == n6 / 2 && s % 2 == 0) split = true;
    bwd(0, split);
  }
  for (int i = 0; i < p - s - 1; ++i) wgt(), bwd(0, true);
  for (int i = 0; i < s + 1; ++i) wgt();
  // Drop the passes of micro-batches past m; a pair keeps the half that remains.
  std::vector<ScheduleTask> kept;
  for (ScheduleTask k : t) {
    if (k.pass == kFB) {
      const bool keep_f = k.mb < m, keep_b = k.mb2 < m;
      if (keep_f && keep_b)
        kept.push_back(k);
      else if (keep_f)
        kept.push_back({kF, k.mb, k.chunk});
      else if (keep_b)
        kept.push_back({kBW, k.mb2, k.chunk2});
    } else if (k.mb < m) {
      kept.push_back(k);
    }
  }
  return kept;
}

class DualPipeV final : public IPipelineSchedule {
 public:
  const char* bubble_formula() const override {
    return "(PP/2 - 1)(F&B + B - 3W) with PP = 2p chunk-stages, as a share of the ranks' sum of "
           "t_i - t_max";
  }
  std::vector<ScheduleTask> task_order(int s, int p, int v, int m) const override {
    if (v != 2) throw std::invalid_argument("the V schedules run two chunks per rank (v = 2)");
    return dualpipe_v_order(s, p, m);
  }
  bool splits_weight_gradients() const override { return true; }
  bool pairs_forward_with_backward() const override { return true; }
  // time(): the order's timeline (the default); with equal stages its bubble is about
  // DeepSeek's (PP/2 - 1)(F&B + B - 3W) over PP = 2p chunk-stages.
  bool accepts_chunks(int v) const override { return v == 2; }
  // DualPipeV.step asserts num_chunks >= num_ranks * 2 (deepseek-ai/DualPipe
  // dualpipe/dualpipev.py, line 318 at commit 3da1bbe).
  bool accepts_microbatches(int p, int, int m) const override { return m >= 2 * p; }
  const char* microbatches_rule() const override {
    return "DualPipeV needs at least 2 x pp micro-batches (dualpipev.py asserts num_chunks >= "
           "num_ranks * 2)";
  }
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
