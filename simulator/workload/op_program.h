// The op program: for a model x workload x plan, the sequence of operations one GPU executes
// for one micro-batch, per layer kind (dense, MoE), plus the first stage's embedding, the last
// stage's logits and loss, and the per-step data-parallel and optimizer work. It is the single
// source of truth both evaluators consume (analytic estimator, discrete-event simulator).
//
// Contract: build_op_program allocates nothing; all sizes are per GPU after sharding.
#pragma once

#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "simulator/workload/op.h"

namespace dtplan {

inline constexpr int kMaxLayerOps = 96;
inline constexpr int kMaxEdgeOps = 24;

using LayerOps = OpList<kMaxLayerOps>;
using EdgeOps = OpList<kMaxEdgeOps>;

// Where each parallel group lives, from the rank order and GPUs per node.
struct Placements {
  GroupPlacement tp, cp, dp, pp, ep, etp, edp;
};

Placements place_groups(const Plan& p, const HardwareProfile& hw, int num_gpus);

struct OpProgram {
  LayerOps dense_layer;  // forward ops, then backward ops, of one dense layer
  LayerOps moe_layer;    // same for a MoE layer (empty for dense models)
  EdgeOps embedding;     // first pipeline stage, before the first layer (fwd + bwd)
  EdgeOps head;          // last pipeline stage: final norm, logits, loss (fwd + bwd)
  Placements groups;
  // Per-step facts the estimator needs.
  double pp_message_bytes = 0;        // activation tensor sent between stages per micro-batch
  int64_t tokens_per_microbatch = 0;  // b x s / cp, on one rank
};

void build_op_program(const ModelSpec& m, const Workload& w, const Plan& p, const Cluster& c,
                      OpProgram& out);

}  // namespace dtplan
