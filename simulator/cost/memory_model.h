// Per-GPU memory of one pipeline rank: weights, gradients and optimizer state by precision and
// sharding, activations per Korthikanti et al. 2022 generalized to GQA/SwiGLU/MoE widths, the
// schedule's in-flight micro-batches, embedding/logits, and runtime buffers.
//
// Bytes per parameter follow Megatron-LM with fp32 main gradients (REFERENCE.md §2.1):
// 2 (bf16/fp16 weights) + 4 (fp32 main grads) + 12 (fp32 master, Adam m and v) = 18, or 16
// with 16-bit gradients (Plan::main_grads_fp32 = false, the ZeRO paper's convention), sharded
// over the data-parallel group by ZeRO stage: 1 -> optimizer, 2 -> +grads, 3 -> +weights
// (stage 1 = Megatron's distributed optimizer: 6 + 12/d).
#pragma once

#include <string>

#include "core/estimate.h"
#include "core/hardware.h"
#include "core/model_spec.h"
#include "core/plan.h"

namespace dtplan {

class IPipelineSchedule;

// Runtime constants (not hardware-specific): the CUDA context's default, kCudaContextBytes, is
// in core/plan.h (Plan::cuda_context_bytes, which a framework profile may change).
// NCCL communicator buffers: NCCL_BUFFSIZE 4 MiB x 2 directions x up to 16 channels per
// communicator (NCCL defaults); we budget one such set per parallel dimension in use.
inline constexpr double kNcclBytesPerCommunicator = 4.0 * 1048576 * 2 * 16;

// The embedding's dropout mask of one micro-batch on the first stage (1 byte per element; none
// without hidden dropout), held like the layers' activations until its backward.
double embedding_mask_bytes(const ModelSpec& m, const Workload& w, const Plan& p);
// The loss stage's scratch for the micro-batch being processed: 16-bit logits, fp32
// cross-entropy and the final hidden states.
double loss_scratch_bytes(const ModelSpec& m, const Workload& w, const Plan& p);

// The CUDA context and one set of NCCL buffers per parallel dimension in use: the runtime's own
// part of StageMemory::buffers_bytes (a real device holds it without the executor allocating it).
double runtime_buffer_bytes(const Plan& p);

// Bytes of one parameter's gradient as the framework keeps and reduces it: fp32 main gradients
// with bf16 and fp8 (Megatron-LM forces accumulate_allreduce_grads_in_fp32 for bf16,
// megatron/training/arguments.py), the 16-bit training precision with fp16 (Megatron's default
// there) or when the plan keeps 16-bit gradients (Plan::main_grads_fp32 = false, DeepSpeed's
// convention). The one rule the memory model and the data-parallel traffic both follow.
double grad_bytes_per_param(const Plan& p, Precision precision);

// Parameters of one rank that live in the transformer layers' linear layers (what FP8 training
// keeps FP8 copies of): attention and MLP projections, shared and routed experts.
struct RankLayers;
double linear_params_on_rank(const ModelSpec& m, const ParamCounts& c, const Plan& p,
                             const RankLayers& l);
// FP8 training's extra bytes per linear parameter (its FP8 copy, its transpose and, by
// recipe, their block scales), the FP8 GEMMs of a rank's layers, and the scaling state
// (scales, amax history) Transformer Engine keeps per FP8 GEMM.
double fp8_weight_copy_bytes_per_param(Fp8Recipe r);
double fp8_gemms_on_rank(const ModelSpec& m, const Plan& p, const RankLayers& l);
double fp8_meta_bytes_per_gemm(const Workload& w);
// Bytes per element of a linear layer's input as kept for its weight gradient: 2 (16-bit), or
// the quantized copy under FP8 training (1, MXFP8 1 + 1/32).
double linear_input_bytes_per_element(const Workload& w);

struct ParamsOnRank {
  double dense = 0;   // sharded over the data-parallel group (dp x cp)
  double expert = 0;  // sharded over the expert-data-parallel group
  double linear = 0;  // of dense + expert, those in linear layers (what FP8 training quantizes)
  double total() const { return dense + expert; }
};

ParamsOnRank params_on_rank(const ModelSpec& m, const Plan& p, int rank);
// The same with the counts and the rank's layers already at hand (the estimator's fast path).
ParamsOnRank params_on_rank(const ModelSpec& m, const ParamCounts& c, const Plan& p, int rank,
                            const RankLayers& l);

// Activation bytes one micro-batch leaves on one layer of this rank until its backward.
double layer_activation_bytes(const ModelSpec& m, const Workload& w, const Plan& p, bool moe);

struct ActivationInputs;
// The activation bytes of one micro-batch that a rank with layers `l` sends to host memory and
// brings back (activation offloading, --cpu-offloading-num-layers; 0 without it or under full
// recomputation): the one derivation the memory model, the host-memory check and the copy time
// of the step (simulator/analytic/stage_times.cpp) share.
double offloaded_activation_bytes(const Plan& p, const RankLayers& l, const ActivationInputs& a);

// Host memory one GPU holds for activation offloading (--cpu-offloading-num-layers): the
// offloaded layers' activations of the micro-batch between its forward and backward (Megatron-
// Core offloads only without pipeline parallelism, so one micro-batch at a time). Pinned host
// buffers; a node's GPUs together need gpus_per_node times this.
double offloaded_host_bytes(const ModelSpec& m, const Workload& w, const Plan& p);
// The reason a plan's offloaded activations do not fit the node's host memory
// (host.memory_gib, none when the profile gives no size), or empty.
std::string host_memory_violation(const ModelSpec& m, const Workload& w, const Plan& p,
                                  const HardwareProfile& hw);

StageMemory stage_memory(const ModelSpec& m, const Workload& w, const Plan& p,
                         const IPipelineSchedule& schedule, int rank);

// Activation bytes per layer and micro-batch for the plan's recomputation and without any.
struct ActivationInputs {
  double dense = 0, moe = 0, full_dense = 0, full_moe = 0;
};
ActivationInputs activation_inputs(const ModelSpec& m, const Workload& w, const Plan& p);

// The same with everything that does not depend on the rank precomputed (estimator fast path);
// `params`, when given, is params_on_rank(m, counts, p, rank, layers).
StageMemory stage_memory(const ModelSpec& m, const Workload& w, const Plan& p,
                         const IPipelineSchedule& schedule, int rank, const ParamCounts& counts,
                         const ActivationInputs& act, const RankLayers& layers,
                         const ParamsOnRank* params = nullptr);

}  // namespace dtplan
