// Plug-in point: a pipeline schedule. One file per schedule in schedule/impl/, registered
// with DTPLAN_REGISTER under the name users pass to --schedule; `dtplan list schedules`
// prints them. The analytic estimator asks a schedule for its pipeline time and for how many
// micro-batches' activations each stage holds at its peak; the discrete-event simulator for
// each rank's task order, whether weight gradients are split and how sends synchronize. A new
// schedule is its file plus one line in simulator/CMakeLists.txt: its task order is all it
// must state; its time defaults to that order's timeline (order_timing.h), and a schedule whose
// bubble a formula states exactly may override time() with it.
//
// Times are per pipeline rank for one micro-batch through all of that rank's chunks:
//   f = forward, b = input-gradient backward (with any recomputation), w = weight gradients.
// Contract: pure functions; arrays have p entries; m >= 1, p >= 1, v >= 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.h"

namespace dtplan {

struct PipelineInput {
  int p = 1;  // pipeline ranks
  int v = 1;  // chunks (virtual stages) per rank
  int m = 1;  // micro-batches per step
  const double* f = nullptr;
  const double* b = nullptr;
  const double* w = nullptr;
  // One point-to-point exchange between neighbouring ranks (already charged per pass inside
  // f and b as the steady state batches them); a schedule adds what its fill and drain pay.
  double p2p_s = 0;
  // The plan may split its layers unevenly (Plan::uneven_pp: the first and last stages take
  // fewer), which makes the interior ranks the slowest.
  bool uneven_split = false;
  // Optional outputs, p entries each, that time() fills when set: when rank i's last task ends
  // and when its last weight-gradient task starts (the bucketed data-parallel reduction starts
  // with it), from the step's first forward.
  double* rank_end_s = nullptr;
  double* rank_grad_start_s = nullptr;
};

// Exchanges per pass inside one micro-batch's f and b (PipelineInput): Megatron-LM's
// schedules.py batches each send with the next receive: without interleaving an interior rank
// exchanges once after its forward (activations out, gradients in) and once after its
// backward, one transfer per pass; the first and last ranks exchange once per micro-batch
// (nothing arrives before the first forward or leaves after the last backward), half a
// transfer per pass. Interleaved, the steady state runs a forward and a backward, then one
// batched exchange for both: v transfers per micro-batch, v/2 per pass (the V schedules, whose
// implementations overlap their sends with compute, are charged the same).
double pipeline_exchanges_per_pass(int stage, int pp, int vpp);

struct PipelineTime {
  double total_s = 0;   // from the first forward to the last backward of the slowest rank
  double bubble_s = 0;  // total minus the busiest rank's m x (f + b + w)
};

// One task of a pipeline rank's order, as the discrete-event simulator runs it.
struct ScheduleTask {
  // kF forward, kB input gradients (with the weight gradients where the schedule does not split
  // them), kW weight gradients, kBW input and weight gradients as one task in a schedule that
  // splits others, kFB an overlapped pair: the forward of (mb, chunk) with the whole backward
  // of (mb2, chunk2) (DualPipeV). Only kF and kB outputs travel between ranks.
  enum Pass : uint32_t { kF = 0, kB = 1, kW = 2, kBW = 3, kFB = 4 };
  Pass pass;
  int mb, chunk;
  int mb2 = -1, chunk2 = -1;  // the backward half of a kFB pair
  // The rank communicates after the next task, not after this one: this task's outputs are
  // sent with the next one's (Megatron's interleaved steady state runs a forward and a
  // backward back to back, then one batched send/recv for both).
  bool hold = false;
  // The rank posts the next receives only once this task's sends have completed (Megatron's
  // 1F1B warm-up and cool-down call send_forward, then recv_forward, as two blocking calls;
  // its steady state batches them).
  bool serial = false;
};

class IPipelineSchedule {
 public:
  virtual ~IPipelineSchedule() = default;
  // The pipeline time; by default the timeline of task_order (time_task_order), which also
  // fills in.rank_end_s / in.rank_grad_start_s. An override must fill them too. Contract (the
  // search's batch-range bounds rely on it; SchedulePlugins.BoundsTheSearchReliesOn checks
  // every registered schedule): no rank ends before it has run its compute, rank_end_s[i] >=
  // m c_i with c_i = f[i] + b[i] + w[i] - 2 pipeline_exchanges_per_pass(i, p, v) p2p_s (the
  // passes less the exchanges charged inside them), so total_s >= m max_i c_i.
  virtual PipelineTime time(const PipelineInput& in) const;
  // Peak activations held by pipeline rank `stage`, in units of one micro-batch through all
  // of that rank's layers. Contract: never falls as m grows (with the other arguments fixed,
  // over the m the schedule accepts), so a plan's memory does not fall as its batch grows.
  virtual double inflight_microbatches(int stage, int p, int v, int m) const = 0;
  // Micro-batches whose logits and cross-entropy scratch the loss stage holds at its peak: one
  // where each micro-batch's loss backward follows its forward before the next forward's loss
  // (1F1B and its kin), every micro-batch where all forwards run first (GPipe).
  virtual double loss_inflight_microbatches(int /*p*/, int /*v*/, int /*m*/) const { return 1; }
  // Whether chunks are placed in a V (rank 0 holds the first and the last chunk): its ranks'
  // in-flight micro-batches need not fall with the stage index.
  virtual bool v_shape() const { return false; }
  // The task order of pipeline rank `stage` of p, with v chunks and m micro-batches: each
  // forward and backward (and, where split, weight-gradient) pass of every (micro-batch, chunk)
  // once, in the order the rank runs them; the simulator runs every registered schedule from
  // this. Requires accepts_chunks(v) and accepts_microbatches(p, v, m).
  virtual std::vector<ScheduleTask> task_order(int stage, int p, int v, int m) const = 0;
  // Whether weight gradients are tasks of their own (zero-bubble and V schedules).
  virtual bool splits_weight_gradients() const { return false; }
  // Whether the schedule runs one micro-batch's forward beside another's backward (kFB pairs),
  // which exists to hide each one's communication (DualPipe's MoE all-to-all) behind the
  // other's compute; the overlap itself is priced by the plan's ep_comm_overlap.
  virtual bool pairs_forward_with_backward() const { return false; }
  // Whether a send waits until its receiver has posted the receive (Megatron's blocking
  // batched send/recv); otherwise receives are posted ahead (asynchronous point-to-point).
  virtual bool rendezvous_sends() const { return false; }
  // The bubble in words and symbols, for reports' derivations (t_i: one micro-batch's F+B+W on
  // rank i with its steady-state exchanges).
  virtual const char* bubble_formula() const { return "sum over ranks of t_i - t_max"; }
  // Parameter copies per rank (DualPipe keeps two).
  virtual int parameter_copies() const { return 1; }
  // Whether the schedule runs v chunks (virtual stages) per rank; `rule` says what it needs.
  virtual bool accepts_chunks(int v) const { return v == 1; }
  virtual const char* chunks_rule() const { return "vpp must be 1 (no virtual stages)"; }
  // Whether the schedule can run m micro-batches on p ranks with v chunks each.
  virtual bool accepts_microbatches(int /*p*/, int /*v*/, int /*m*/) const { return true; }
  virtual const char* microbatches_rule() const { return ""; }
};

// Shared helper: steady state m x t_max plus `bubble_units` x (sum of t_i - t_max), where
// t_i = f_i + b_i + w_i. With uniform stages this is (m + bubble_units (p-1)) t.
PipelineTime pipeline_time_with_bubble(const PipelineInput& in, double bubble_scale);

// For a formula's time(): fills in.rank_end_s[i] = total_s - slack(i) and
// in.rank_grad_start_s[i] = that end - window(i), where they are set; slack(i) is how long
// before the step's last task rank i's last one ends, window(i) its last weight-gradient task.
template <typename Slack, typename Window>
void fill_rank_ends(const PipelineInput& in, double total_s, Slack slack, Window window) {
  for (int i = 0; i < in.p; ++i) {
    const double end = total_s - slack(i);
    if (in.rank_end_s) in.rank_end_s[i] = end;
    if (in.rank_grad_start_s) in.rank_grad_start_s[i] = end - window(i);
  }
}

// The same with a bubble unit per rank: steady state m x t_max plus the sum of every rank's
// unit but the slowest rank's, with unit(i) its share of the fill and drain (t_i for 1F1B; with
// uniform stages this is (p-1) x unit). Matches the simulated timeline with unequal stages
// (the embedding on the first, the head on the last) where a scale on the sums does not.
template <typename Unit>
PipelineTime pipeline_time_with_rank_bubble(const PipelineInput& in, Unit unit) {
  double t_max = -1, sum = 0, unit_of_max = 0;
  for (int i = 0; i < in.p; ++i) {
    const double t = in.f[i] + in.b[i] + in.w[i];
    const double u = unit(i);
    sum += u;
    if (t > t_max) t_max = t, unit_of_max = u;
  }
  PipelineTime out;
  out.bubble_s = sum - unit_of_max > 0 ? sum - unit_of_max : 0.0;
  out.total_s = in.m * t_max + out.bubble_s;
  return out;
}

const IPipelineSchedule* find_schedule(const std::string& name);
// The plan's schedule; 1F1B when there is no pipeline (pp = 1). Null for an unknown name.
const IPipelineSchedule* plan_schedule(const Plan& p);
// The pipeline rank that holds the output layer and the loss: the last one, or rank 0 under a
// V-shaped schedule, whose second chunk runs back down to rank 0 (task_flow.h, holds_loss).
int loss_rank(const Plan& p);
// Whether the plan's schedule is V-shaped (rank r holds chunks r and 2p - 1 - r).
bool v_shaped(const Plan& p);

}  // namespace dtplan
