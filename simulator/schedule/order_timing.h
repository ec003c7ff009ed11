// A schedule's pipeline time read off its own task order (IPipelineSchedule::task_order), the
// closed form of the schedules whose bubble no formula states exactly for unequal stages and
// few micro-batches (zero-bubble, V, GPipe). Each rank runs its tasks in order; a task starts
// once the rank is free and its input has arrived; an exchange takes one p2p_s and blocks its
// sender until it lands, and under rendezvous_sends() starts only once the receiver has posted
// its receive (the rules of task_flow.h). This is the discrete-event simulator's timeline with
// contention off (no shared links, no topology, no data-parallel traffic), computed by sweeping
// the ranks until every task has a time: O(tasks) work, no heap allocation once a thread has
// seen the (schedule, p, v, m).
#pragma once

#include "simulator/schedule/i_pipeline_schedule.h"

namespace dtplan {

// in.f and in.b carry the steady-state exchanges (pipeline_exchanges_per_pass x p2p_s) as the
// estimator charges them; they are taken out and the exchanges timed one by one. Fills
// in.rank_end_s and in.rank_grad_start_s when set. Requires the schedule to accept (v, m).
PipelineTime time_task_order(const IPipelineSchedule& s, const PipelineInput& in);

}  // namespace dtplan
