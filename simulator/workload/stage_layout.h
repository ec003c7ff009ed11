// Which layers each pipeline rank holds: pp x vpp chunks, round-robin over ranks
// (Megatron's interleaved assignment), with an even split or, when the plan allows uneven
// stages, fewer layers on the first and last ranks (which also hold embedding and head).
#pragma once

#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

struct RankLayers {
  int dense = 0;
  int moe = 0;
  int total() const { return dense + moe; }
  bool operator==(const RankLayers&) const = default;
};

// Transformer layers pipeline rank `rank` (0-based) runs over all of its chunks: its decoder
// layers and, on the loss rank, the layer of each multi-token-prediction module (what the cost
// and memory models price).
RankLayers layers_on_rank(const ModelSpec& m, const Plan& p, int rank);
// The decoder layers alone (what a launch file's pipeline split counts).
RankLayers decoder_layers_on_rank(const ModelSpec& m, const Plan& p, int rank);

// The layers [begin, end) of model chunk `chunk` of pp x vpp, in layer order (chunk v x pp + r
// is the v-th chunk of rank r; V-shaped schedules place chunks differently, see
// layers_on_rank). With a two-part split (vpp 1) chunk r is rank r.
struct LayerRange {
  int begin = 0, end = 0;
  int size() const { return end - begin; }
};
LayerRange chunk_layers(const ModelSpec& m, const Plan& p, int chunk);

// Of a rank's layers `l`, those its recomputation re-runs: with full recomputation of
// --recompute-layers k, the first k of each chunk (Megatron's block method, dense layers
// counted first); otherwise all of them.
RankLayers recomputed_layers(const Plan& p, const RankLayers& l);

// Of a rank's layers `l`, those whose activations go to host memory: the first
// Plan::offload_layers of each of its vpp chunks (Megatron-Core's CPU offloading context wraps
// the first N layers of a TransformerBlock), dense layers counted first.
RankLayers offloaded_layers(const Plan& p, const RankLayers& l);

}  // namespace dtplan
