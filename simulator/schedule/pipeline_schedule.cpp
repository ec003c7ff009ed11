#include <algorithm>

#include "core/registry.h"
#include "simulator/schedule/i_pipeline_schedule.h"
#include "simulator/schedule/order_timing.h"

namespace dtplan {

PipelineTime pipeline_time_with_bubble(const PipelineInput& in, double bubble_scale) {
  double t_max = 0, t_sum = 0;
  for (int i = 0; i < in.p; ++i) {
    const double t = in.f[i] + in.b[i] + in.w[i];
    t_max = std::max(t_max, t);
    t_sum += t;
  }
  PipelineTime out;
  out.bubble_s = std::max(0.0, bubble_scale * (t_sum - t_max));
  out.total_s = in.m * t_max + out.bubble_s;
  return out;
}

PipelineTime IPipelineSchedule::time(const PipelineInput& in) const {
  return time_task_order(*this, in);
}

double pipeline_exchanges_per_pass(int stage, int pp, int vpp) {
  if (vpp > 1) return 0.5 * vpp;
  return stage == 0 || stage == pp - 1 ? 0.5 : 1.0;
}

const IPipelineSchedule* find_schedule(const std::string& name) {
  return Registry<IPipelineSchedule>::global().find(name);
}

bool v_shaped(const Plan& p) {
  if (p.pp <= 1) return false;
  const IPipelineSchedule* s = plan_schedule(p);
  return s && s->v_shape();
}

int loss_rank(const Plan& p) { return v_shaped(p) ? 0 : p.pp - 1; }

const IPipelineSchedule* plan_schedule(const Plan& p) {
  static const IPipelineSchedule* const one_f_one_b = find_schedule("1f1b");
  if (p.pp <= 1) return one_f_one_b;
  // The last plan's schedule, per thread: plans of a search share a few names.
  thread_local ScheduleName last_name;
  thread_local const IPipelineSchedule* last = nullptr;
  if (last && p.schedule == last_name) return last;
  const IPipelineSchedule* s = find_schedule(p.schedule);
  if (s) last_name = p.schedule, last = s;
  return s;
}

}  // namespace dtplan
