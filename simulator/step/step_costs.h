// StepCosts: what one training step of a plan costs, computed once by the cost model (the
// estimator's stage loop, data-parallel and optimizer costs) and read by both evaluators: the
// closed-form estimate composes it with a schedule's bubble formula, the discrete-event
// simulator schedules it on streams and links. Neither re-derives a cost.
//
// Communication is charged per parallel dimension through CommLedger: each charge adds its
// time alone, the part of it the step waits for and the bytes it sends, together, so the
// exposed time of a dimension is the sum of parts of its total.
#pragma once

#include <array>
#include <vector>

#include "core/estimate.h"

namespace dtplan {

// One parallel dimension's communication over a step on one GPU.
struct CommCharge {
  double time_s = 0;     // every collective of the dimension, as if alone
  double exposed_s = 0;  // the part the step waits for (0 <= exposed_s <= time_s)
  double bytes = 0;      // sent by the GPU
};

class CommLedger {
 public:
  // Charges `count` times a collective (or a sum of them) of `time_s` alone, of which
  // `exposed_s` is exposed, and `bytes` sent. Precondition: 0 <= exposed_s <= time_s (the cost
  // functions that produce them state it); it is not clamped here, so that a cost function
  // breaking it shows in the totals (StepCostsProperty.InvariantsHoldOnRandomPlans).
  void charge(int dim, double time_s, double exposed_s, double bytes, double count = 1) {
    CommCharge& c = dims_[static_cast<size_t>(dim)];
    c.time_s += count * time_s;
    c.exposed_s += count * exposed_s;
    c.bytes += count * bytes;
  }
  const CommCharge& operator[](int dim) const { return dims_[static_cast<size_t>(dim)]; }
  void clear() { dims_ = {}; }

 private:
  std::array<CommCharge, kCommDims> dims_{};
};

// The per-stage detail the simulator schedules (allocating; the search's estimates skip it).
// Per rank and micro-batch, through all of the rank's chunks.
struct StepCosts {
  std::vector<double> f, b, w;  // compute, without the pipeline transfers
  double p2p_s = 0;             // one activation send between neighbouring ranks
  double p2p_bytes = 0;
  double pipeline_s = 0;  // the closed form's pipeline time (compute + bubble + sends)
  // Per stage: the data-parallel reduction that trails its last backward (ZeRO 0-1: the
  // step's one reduction and gather; ZeRO-2: the last micro-batch's reduce-scatter and the
  // gather), alone (empty with ZeRO-3), and that reduction's exposed part as the closed form
  // charged it on the rank the step waits for. ZeRO-2's earlier reductions stay closed form.
  std::vector<double> dp_s;
  double dp_exposed_s = 0;
  // Per stage, beside dp_s: the share of that reduction in its last bucket, which trails the
  // last backward when the reduction is bucketed (DpStage::bucket_share).
  std::vector<double> dp_last_share;
  // Per stage, ZeRO-3 only: one micro-batch's parameter gathers in the forward passes, and
  // gathers plus gradient reduce-scatters in the backward, alone (the closed form charges
  // their exposed part; the simulator draws them beside the compute they overlap).
  std::vector<std::array<double, 2>> zero3_fwd_bwd_s;
  // Per stage: exposed TP, CP and EP communication of one micro-batch (all passes), seconds.
  std::vector<std::array<double, 3>> exposed_tp_cp_ep;
};

}  // namespace dtplan
