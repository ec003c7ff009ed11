// Data-parallel communication of one pipeline rank: the gradient reduction and parameter
// gather of ZeRO 0-2 (Megatron DDP / distributed optimizer, DeepSpeed ZeRO-1/2) and the
// per-layer gathers and reduce-scatters of ZeRO-3 / FSDP, with what of them the step waits for.
//
// Contract: pure functions; collectives are priced through the caller's `CollectivePrice` (the
// estimator passes its cache). For every result, 0 <= exposed_s <= time_s.
#pragma once

#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "simulator/cost/memory_model.h"
#include "simulator/workload/op.h"

namespace dtplan {

struct Placements;
struct RankLayers;

// Prices one collective: seconds for `bytes` over the group `g`.
struct CollectivePrice {
  double (*fn)(void* ctx, CollectiveOp op, double bytes, const GroupPlacement& g);
  void* ctx;
  double operator()(CollectiveOp op, double bytes, const GroupPlacement& g) const {
    return fn(ctx, op, bytes, g);
  }
};

// One rank's data-parallel collectives, which do not depend on the recomputation, micro-batch,
// schedule or global batch (the estimator caches them per layout and ZeRO stage).
struct DpStage {
  ParamsOnRank prm;
  // ZeRO 0-2: one gradient reduction (all-reduce, or reduce-scatter with ZeRO 1-2) and the
  // 16-bit parameter all-gather after the optimizer step (ZeRO 1-2), alone, and bytes sent.
  double reduce_s = 0, reduce_bytes = 0;
  double gather_s = 0, gather_bytes = 0;
  // ZeRO-3, per layer: all-gather of its parameters, reduce-scatter of its gradients (when the
  // data-parallel group has more than one rank); bytes sent per layer for each.
  double layer_gather_s = 0, layer_reduce_s = 0;
  double layer_gather_bytes = 0, layer_reduce_bytes = 0;
  // ZeRO 0-2 with overlap: the share of the rank's gradients (and gathered parameters) in one
  // bucket, which is what a bucketed reduction leaves after the last backward and a bucketed
  // parameter gather leaves before the first forward. Megatron-Core's default bucket:
  // max(40M, 1M x dp-group size) parameters (distributed_data_parallel.py:133-134 @d98e8a6);
  // at most 1.
  double bucket_share = 1;
};

// Megatron-Core's default gradient / parameter bucket, in parameters, for a data-parallel
// group of `dp_size` ranks (distributed_data_parallel.py:133-134 @d98e8a6).
double default_bucket_params(int dp_size);

// ZeRO-3 all-gathers of a layer's parameters per micro-batch in the forward: one, and a second
// for the recomputed forward under full recomputation where the framework releases gathered
// parameters after the forward and gathers them again (DeepSpeed stage 3, per tensor). FSDP
// wraps the checkpointed block inside its unit and recomputes after the backward's unshard, so
// it gathers once (torch.distributed.fsdp, Composer's activation_checkpointing_fn: research
// notes in docs/performance-model.md).
double zero3_forward_gathers(const Plan& p);

DpStage dp_stage(const ModelSpec& m, const ParamCounts& counts, const Plan& p, int rank,
                 const RankLayers& layers, const Placements& groups, double grad_bytes,
                 const CollectivePrice& price);

// What one rank's data-parallel communication costs over a step of `microbatches`, given its
// per-micro-batch forward `f_s` and backward `bw_s` (input and weight gradients, recomputation
// included) and the `slack_s` its last backward ends before the step's last one:
// - ZeRO 0-1: one reduction after the last backward; bucketed (overlap_grad_reduce) it runs
//   with the last backward task (window_s) and its last bucket (bucket_share) always trails it.
// - ZeRO-2: gradients are kept only as a 1/dp shard, so every micro-batch's backward
//   reduce-scatters its gradients (DeepSpeed stage 2 reduces buckets during each backward);
//   a micro-batch's reduction hides behind the next micro-batch's compute, the last one's
//   trails the step like ZeRO-1's.
// - ZeRO 1-2: the all-gather of the updated parameters after the optimizer step is exposed,
//   or with overlap_param_gather hides behind the next step's first forward but for its first
//   bucket (bucket_share).
// - ZeRO-3: every layer gathers its parameters before its forward (and recomputed forward)
//   and backward and reduce-scatters its gradients, each micro-batch; a gather prefetches
//   behind the previous layer's compute, the first layer's has nothing to hide behind.
struct DpCost {
  double time_s = 0;     // all of it, alone
  double exposed_s = 0;  // what the step waits for
  double bytes = 0;      // sent by this rank
  // The reduction that trails the last backward (ZeRO 0-2), alone, and its part of exposed_s:
  // what the discrete-event simulator replays on the links.
  double trailing_s = 0, trailing_exposed_s = 0, trailing_bytes = 0;
  // The parameter all-gather after the optimizer step (ZeRO 1-2), alone, and its part of
  // exposed_s (the simulator keeps the closed form's, as it keeps the optimizer's).
  double gather_s = 0, gather_exposed_s = 0, gather_bytes = 0;
  // What of time_s runs while this rank computes (hidden behind its forward or backward): the
  // time its compute shares the SMs and memory with the collectives (the profile's
  // comm_compute_slowdown applies to it, as to overlapped TP communication and as the
  // discrete-event simulator slows compute while a rank's DP traffic runs).
  double hidden_s = 0;
};
// `window_s`: the rank's last weight-gradient task, which a bucketed reduction overlaps (from
// the schedule's time(), PipelineInput::rank_grad_start_s: a whole micro-batch's backward in
// 1F1B, one chunk's interleaved, the last weight-gradient pass in the zero-bubble schedules);
// `slack_s`: how long before the step's last task the rank's last one ends.
DpCost dp_step_cost(const DpStage& s, const Plan& p, int layers, int microbatches, double f_s,
                    double bw_s, double window_s, double slack_s);

}  // namespace dtplan
