// Interleaved 1F1B (Narayanan et al. 2021 §2.2.2): v chunks per rank cut the bubble to
// (p-1)(F+B)/v. Stage i warms up 2(p-i-1) + (v-1)p + 1 chunk-micro-batches of L/(pv) layers
// (Megatron schedules.py), i.e. p + (p-1)/v micro-batches on stage 0 (REFERENCE.md §2.2).
#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/schedule/order_timing.h"

namespace dtplan {
namespace {
using enum ScheduleTask::Pass;  // kF, kB, kW, ... (unity builds: one name in every file)
class Interleaved final : public IPipelineSchedule {
 public:
  const char* bubble_formula() const override {
    return "(1/v) x (sum over ranks of t_i - t_max) + (2(p-1) + (v-2)p) x one exchange (the "
           "warm-up and cool-down exchange after every chunk pass)";
  }
  std::vector<ScheduleTask> task_order(int s, int p, int v, int m) const override {
    std::vector<ScheduleTask> t;
    // Interleaved: micro-batches in groups of p; each group runs through chunk 0, then chunk 1,
    // ... (Megatron's virtual micro-batch order; a last group smaller than p when p does not
    // divide m, as Megatron-Core's microbatch_group_size_per_vp_stage = p does).
    std::vector<ScheduleTask> fwd, bwd;
    for (int g0 = 0; g0 < m; g0 += p) {
      const int size = std::min(p, m - g0);
      for (int c = 0; c < v; ++c)
        for (int i = 0; i < size; ++i) {
          fwd.push_back({kF, g0 + i, c});
          bwd.push_back({kB, g0 + i, v - 1 - c});
        }
    }
    const int total = m * v;
    const int warm = std::min(total, (p - s - 1) * 2 + (v - 1) * p);
    int f = 0, b = 0;
    for (; f < warm; ++f) t.push_back(fwd[static_cast<size_t>(f)]);
    while (f < total) {
      t.push_back(fwd[static_cast<size_t>(f++)]);
      t.back().hold = true;
      t.push_back(bwd[static_cast<size_t>(b++)]);
    }
    while (b < total) t.push_back(bwd[static_cast<size_t>(b++)]);
    return t;
  }
  bool rendezvous_sends() const override { return true; }
  // The steady state batches a forward's and a backward's exchanges into one (charged in f and
  // b); the warm-up and cool-down exchange after every chunk pass (Megatron's p2p_communicate
  // per warm-up forward and cool-down backward), which puts 2(p-1) + (v-2)p more exchanges on
  // the critical path whatever m [derived from the order below on the timeline:
  // SchedulePlugins.InterleavedFillAndDrainExchanges].
  PipelineTime time(const PipelineInput& in) const override {
    // An uneven split (lighter first and last chunks) is timed on its order: the formula drifts
    // up to 1.2% from it there (StepCostsProperty, 2026-12-02). The search never pairs an
    // uneven split with virtual stages, so it does not pay the order's O(p v m).
    if (in.uneven_split && accepts_microbatches(in.p, in.v, in.m))
      return time_task_order(*this, in);
    PipelineTime t = pipeline_time_with_bubble(in, 1.0 / in.v);
    if (in.p > 1) {
      const double extra = (2.0 * (in.p - 1) + (in.v - 2.0) * in.p) * in.p2p_s;
      t.bubble_s += extra;
      t.total_s += extra;
    }
    // The cool-down's chunk backwards reach rank 0 last: rank i ends i chunk passes earlier;
    // the reduction overlaps one chunk's backward.
    fill_rank_ends(
        in, t.total_s, [&](int i) { return i * (in.b[i] + in.w[i]) / in.v; },
        [&](int i) { return (in.b[i] + in.w[i]) / in.v; });
    return t;
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
