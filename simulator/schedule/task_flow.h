// The rules by which a pipeline rank's task order (IPipelineSchedule::task_order) moves data,
// shared by the closed form's order timing (order_timing.h) and the discrete-event simulator
// (des/pipeline_sim.cpp), so that the two run the same schedule: where a task's output goes,
// which chunk holds the loss, and which receives a rank posts at a communication point.
#pragma once

#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {

// Where the output of `pass` (kF: activations, kB: input gradients) of `chunk` on stage s goes:
// stage `to`, chunk `chunk`; to < 0 where it leaves the pipeline; `local` where the V turns on
// the last stage (chunk 0 feeds chunk 1 forward, chunk 1 feeds chunk 0 backward) and nothing is
// sent. Without a V the last stage's forward output goes to stage 0's next chunk (interleaved).
struct PipelineHop {
  int to = -1, chunk = 0;
  bool local = false;
};
inline PipelineHop pipeline_hop(bool v_shape, int p, int v, ScheduleTask::Pass pass, int s,
                                int chunk) {
  const bool fwd = pass == ScheduleTask::kF;
  if (v_shape) {
    const bool down = fwd == (chunk == 0);  // towards stage p-1
    if (down) return s < p - 1 ? PipelineHop{s + 1, chunk, false} : PipelineHop{s, 1 - chunk, true};
    return s > 0 ? PipelineHop{s - 1, chunk, false} : PipelineHop{};
  }
  if (fwd)
    return s < p - 1       ? PipelineHop{s + 1, chunk, false}
           : chunk < v - 1 ? PipelineHop{0, chunk + 1, false}
                           : PipelineHop{};
  return s > 0       ? PipelineHop{s - 1, chunk, false}
         : chunk > 0 ? PipelineHop{p - 1, chunk - 1, false}
                     : PipelineHop{};
}

// The chunk that holds the loss starts its backward from its own forward: the last chunk on the
// last stage, or stage 0's chunk 1 in a V.
inline bool holds_loss(bool v_shape, int p, int v, int s, int chunk) {
  return v_shape ? s == 0 && chunk == 1 : s == p - 1 && chunk == v - 1;
}

// At a communication point (after each task that does not hold its outputs) a rank posts the
// receives of the inputs its tasks need up to its next communication point, skipping points
// with nothing to receive (a W), as Megatron's batched send/recv calls do. Calls post(pass,
// chunk, mb) for each, pass kF (activations) or kB (gradients), from task `next` on.
template <typename Post>
void post_receives_from(const std::vector<ScheduleTask>& order, size_t next, Post post) {
  bool posted_any = false;
  for (size_t k = next; k < order.size(); ++k) {
    const ScheduleTask& t = order[k];
    if (t.pass == ScheduleTask::kF || t.pass == ScheduleTask::kFB)
      post(ScheduleTask::kF, t.chunk, t.mb);
    if (t.pass == ScheduleTask::kB || t.pass == ScheduleTask::kBW)
      post(ScheduleTask::kB, t.chunk, t.mb);
    if (t.pass == ScheduleTask::kFB) post(ScheduleTask::kB, t.chunk2, t.mb2);
    posted_any = posted_any || t.pass != ScheduleTask::kW;
    if (posted_any && !t.hold) break;
  }
}

// A task's compute time on a stage whose one micro-batch through all v chunks takes f, b, w
// (without exchanges): a chunk's share of its passes. An overlapped pair gets no overlap credit.
inline double task_seconds(const ScheduleTask& t, bool split_w, int v, double f, double b,
                           double w) {
  f /= v, b /= v, w /= v;
  switch (t.pass) {
    case ScheduleTask::kF:
      return f;
    case ScheduleTask::kW:
      return w;
    case ScheduleTask::kB:
      return split_w ? b : b + w;
    case ScheduleTask::kBW:
      return b + w;
    case ScheduleTask::kFB:
      return f + b + w;
  }
  return 0;
}

// Whether the task produces weight gradients (the data-parallel reduction starts with the
// rank's last such task): every backward task except an input-gradient-only B.
inline bool produces_weight_gradients(const ScheduleTask& t, bool split_w) {
  return t.pass != ScheduleTask::kF && !(split_w && t.pass == ScheduleTask::kB);
}

}  // namespace dtplan
