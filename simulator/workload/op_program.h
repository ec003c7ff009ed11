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

inline constexpr int kMaxLayerOps = 128;
inline constexpr int kMaxEdgeOps = 24;

using LayerOps = OpList<kMaxLayerOps>;
using EdgeOps = OpList<kMaxEdgeOps>;

// Where each parallel group lives, from the rank order and GPUs per node.
struct Placements {
  GroupPlacement tp, cp, dp, pp, ep, etp, edp;
};

Placements place_groups(const Plan& p, const HardwareProfile& hw, int num_gpus);

// MoE token dispatch that deduplicates per node (DeepEP's internode kernels, HybridEP): a token
// bound for several experts on one node crosses the network once and is fanned out over NVLink
// there. Returns the share of the remote token-expert pairs that cross the network, for routing
// spread uniformly over the experts (the benchmarks' force-balanced routing; Megatron-LM
// moe_router_force_load_balancing), the experts spread evenly over `nodes` nodes in contiguous
// blocks, and group-limited routing where the model has it (a token uses group_topk of the
// groups). Derivation in docs/performance-model.md: nodes x P(a node is touched) / topk.
double moe_node_dedup_share(const MoeSpec& e, int nodes);

struct OpProgram {
  LayerOps dense_layer;  // forward ops, then backward ops, of one dense layer
  LayerOps moe_layer;    // same for a MoE layer (empty for dense models)
  EdgeOps embedding;     // first pipeline stage, before the first layer (fwd + bwd)
  EdgeOps head;          // last pipeline stage: final norm, logits, loss (fwd + bwd)
  // Loss stage, per multi-token-prediction module, besides its transformer layer and its pass
  // through the head: the embedding lookup, two norms and the 2h -> h projection (fwd + bwd).
  EdgeOps mtp;
  Placements groups;
  // Per-step facts the estimator needs.
  double pp_message_bytes = 0;        // activation tensor sent between stages per micro-batch
  int64_t tokens_per_microbatch = 0;  // b x s / cp, on one rank
};

void build_op_program(const ModelSpec& m, const Workload& w, const Plan& p, const Cluster& c,
                      OpProgram& out);

// FP8 training's quantization traffic (Transformer Engine under Megatron-Core; the research notes
// and sources are in docs/performance-model.md §4): bytes read plus written per element of a
// tensor that one quantization kernel turns into the FP8 copies its GEMMs read, with the BF16
// input already in memory. One kernel writes the row-wise copy and, where the GEMMs need one,
// the column-wise copy: a transpose on Hopper (FP8 GEMMs take only the TN layout), none on
// Blackwell for per-tensor scaling, always for MXFP8 and blockwise scaling (their scales run
// along the other axis). Current (per-tensor, "tensorwise") scaling reads the tensor twice:
// an amax pass before the cast. After a LayerNorm/RMSNorm the norm kernel itself writes FP8
// (delayed) or the amax (current), so what is left is the transpose (Hopper) or the cast.
enum class Fp8Tensor { kInput, kInputAfterNorm, kOutputGradient, kWeight };
double fp8_quantize_bytes_per_element(Fp8Recipe r, bool non_tn_gemm, Fp8Tensor t);
// Kernel launches of one such quantization (the amax, scale and cast kernels of current scaling).
int fp8_quantize_kernels(Fp8Recipe r, Fp8Tensor t);

}  // namespace dtplan
