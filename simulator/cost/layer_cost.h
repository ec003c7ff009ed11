// Costs of one layer kind (dense, MoE, the embedding, the head) for one micro-batch on one GPU:
// the op program's ops priced by the compute and collective cost models, with each pass's
// overlapped communication set against the compute it may hide behind.
//
// Contract: layer_costs() allocates nothing; for every dimension d of every LayerCost,
// exposed[d] <= comm_time[d] and exposed_r[d] <= comm_time_r[d] (exposed communication is
// always a part of the communication it comes from).
#pragma once

#include <array>
#include <vector>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "simulator/cost/memory_model.h"
#include "simulator/workload/op.h"

namespace dtplan {

struct LayerCost {
  double f = 0, b = 0, w = 0;  // compute + exposed communication
  double r = 0;                // recomputation (forward ops re-run before the backward)
  double compute_f = 0, compute_b = 0, compute_w = 0, compute_r = 0;
  double overhead = 0;                      // host-dispatch time the GPU waits for (all passes)
  std::array<double, kCommDims> exposed{};  // per micro-batch, forward + backward (no recompute)
  std::array<double, kCommDims> volume{};   // bytes sent per rank per micro-batch
  std::array<double, kCommDims> comm_time{};
  // Communication that recomputation runs again (full recomputation re-runs the forward's
  // collectives): exposed part, bytes and time.
  std::array<double, kCommDims> exposed_r{}, volume_r{}, comm_time_r{};
};

// Everything about one layer's ops that does not depend on pp, dp, vpp, zero or the schedule.
struct LayerCostSet {
  LayerCost dense, moe, emb, head;
  // Multi-token prediction, per module on the loss rank: its own ops (OpProgram::mtp); its
  // layer is among the rank's layers and its logits and loss are one more head pass.
  LayerCost mtp;
  int mtp_modules = 0;
  double pp_message_bytes = 0;
  ActivationInputs activations;
};

LayerCostSet layer_costs(const ModelSpec& m, const Cluster& c, const Workload& w, const Plan& p);

// Bytes one rank sends for a collective of `o.bytes` over its group (ring volumes).
double sent_bytes(const Op& o);

// Parameter tensors of one layer as frameworks hold them (what ZeRO-3 gathers one by one).
int param_tensors_per_layer(const ModelSpec& m);

// One op of the op program with what it costs on one GPU for one micro-batch: the rows behind
// a LayerCost (`dtplan estimate --ops`). `time_s` is GPU time (a collective's whole time, its
// exposed part is decided per pass in LayerCost); `efficiency` is the share of the peak a GEMM
// or fused attention reaches (0 for other ops); `host_s` is the framework's launch time.
struct OpCostRow {
  const char* layer = "";  // "dense", "moe", "embedding", "head", "mtp"
  Op op;
  double time_s = 0, host_s = 0, efficiency = 0;
  double flops = 0;            // GEMM or attention FLOPs of the op (all copies)
  const char* algorithm = "";  // a collective's algorithm
  bool recomputed = false;     // re-run before the backward under the plan's recomputation
};
// Not for the hot path: allocates.
std::vector<OpCostRow> op_cost_rows(const ModelSpec& m, const Cluster& c, const Workload& w,
                                    const Plan& p);

}  // namespace dtplan
