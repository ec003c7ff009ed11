// Hand-worked checks of the cost-model rules of issue #14: ZeRO-2's per-micro-batch gradient
// reduction, the context-parallel exposure crossover, FP8 weight copies, 16-bit gradients with
// fp16, ZeRO-3's events in the simulator's trace, and the exposed <= total cases the issue
// reported. Expected values are computed here from the definitions (parameter counts from the
// model, collective prices from the collective cost model), not read from the estimator.
#include <gtest/gtest.h>

#include <string>

#include "core/catalog.h"
#include "simulator/analytic/estimator.h"
#include "simulator/cost/collective_cost.h"
#include "simulator/cost/memory_model.h"
#include "simulator/des/step_sim.h"
#include "simulator/workload/op_program.h"
#include "simulator/workload/stage_layout.h"
#include "tests/unit/simulator/test_plans.h"

namespace dtplan {
namespace {

constexpr int kDp = static_cast<int>(CommDim::kDP);
constexpr int kCp = static_cast<int>(CommDim::kCP);
constexpr int kTp = static_cast<int>(CommDim::kTP);

Plan dp_plan(int zero, int gbs) {
  Plan p;
  p.tp = 1;
  p.dp = 64;
  p.zero = zero;
  p.mbs = 1;
  p.gbs = gbs;
  p.recompute = Recompute::kFull;
  return p;
}

// Llama 3 8B on 64 A100, DP 64, 8 micro-batches. ZeRO-1 reduce-scatters the fp32 gradients
// once and all-gathers the bf16 weights: (n-1)/n x P x (4 + 2) bytes. ZeRO-2 keeps only a
// gradient shard, so each of the 8 micro-batches reduce-scatters: (n-1)/n x P x (8 x 4 + 2).
TEST(ModelFixes, ZeroTwoReduceScattersEveryMicroBatch) {
  const ModelSpec m = load_model("llama3-8b");
  const Cluster c = load_cluster("dgx-a100-80g", 64);
  Workload w;
  w.seq_len = 8192;
  w.global_batch = 512;
  const double n = 64;
  const double params = params_on_rank(m, dp_plan(1, 512), 0).total();
  for (int gbs : {64, 512}) {
    w.global_batch = gbs;
    const Estimate z1 = estimate(m, c, w, dp_plan(1, gbs));
    const Estimate z2 = estimate(m, c, w, dp_plan(2, gbs));
    const double mb = static_cast<double>(gbs) / 64;
    EXPECT_NEAR(z1.comm_volume_bytes[kDp], (n - 1) / n * params * (4 + 2), 1e-6 * params);
    EXPECT_NEAR(z2.comm_volume_bytes[kDp], (n - 1) / n * params * (mb * 4 + 2), 1e-6 * params);
    const GroupPlacement& g = place_groups(dp_plan(2, gbs), c.profile, 64).dp;
    const double rs =
        collective_cost(c.profile, CollectiveOp::kReduceScatter, params * 4, g).time_s;
    const double ag = collective_cost(c.profile, CollectiveOp::kAllGather, params * 2, g).time_s;
    EXPECT_NEAR(z2.comm_time_s[kDp], mb * rs + ag, 1e-9 * (rs + ag));
    EXPECT_GE(z2.exposed_comm_s[kDp], z1.exposed_comm_s[kDp]);
  }
}

// Ring attention hides each of the cp - 1 K/V transfers behind one chunk's attention. A
// short sequence over CP ranks on different nodes (transfer longer than a chunk's compute)
// exposes the difference; a long sequence on NVLink (compute longer) exposes nothing.
TEST(ModelFixes, ContextParallelExposesTransfersLongerThanAChunk) {
  const ModelSpec m = load_model("llama3-70b");
  Plan p;
  p.tp = 8;
  p.cp = 8;
  p.dp = 1;
  p.sp = true;
  p.mbs = 1;
  p.gbs = 8;
  p.recompute = Recompute::kSelective;
  Workload w;
  w.global_batch = 8;
  // CP across 8 nodes (tp fills each node), 2K tokens: 256 tokens per rank.
  w.seq_len = 2048;
  const Cluster across = load_cluster("dgx-a100-80g", 64);
  const Estimate short_seq = estimate(m, across, w, p);
  EXPECT_GT(short_seq.exposed_comm_s[kCp], 0.0);
  EXPECT_LE(short_seq.exposed_comm_s[kCp], short_seq.comm_time_s[kCp]);
  // CP within one node (tp 1): 128K tokens, 16K per rank: attention dominates.
  Plan q = p;
  q.tp = 1;
  q.sp = false;
  q.gbs = 1;
  w.global_batch = 1;
  w.seq_len = 131072;
  const Cluster node = load_cluster("dgx-h100", 8);
  const Estimate long_seq = estimate(m, node, w, q);
  EXPECT_GT(long_seq.comm_time_s[kCp], 0.0);
  EXPECT_EQ(long_seq.exposed_comm_s[kCp], 0.0);
}

// FP8 (Transformer Engine) keeps an FP8 copy and its transpose of every linear weight: two more
// bytes per linear parameter than BF16, nothing more for embeddings and norms.
TEST(ModelFixes, FpEightKeepsWeightCopiesAndTransposes) {
  const ModelSpec m = load_model("llama3-70b");
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.dp = 2;
  p.sp = true;
  p.zero = 1;
  p.gbs = 64;
  Workload w;
  w.seq_len = 8192;
  w.global_batch = 64;
  const ParamCounts counts = count_params(m);
  for (int rank : {0, 1, 3}) {
    const RankLayers l = layers_on_rank(m, p, rank);
    const double linear = l.total() *
                          (static_cast<double>(counts.attention_per_layer) +
                           static_cast<double>(counts.dense_mlp_per_layer)) /
                          p.tp;
    w.precision = Precision::kBf16;
    const double bf16 = all_stage_memory(m, w, p)[static_cast<size_t>(rank)].weights_bytes;
    w.precision = Precision::kFp8;
    const double fp8 = all_stage_memory(m, w, p)[static_cast<size_t>(rank)].weights_bytes;
    EXPECT_NEAR(fp8 - bf16, 2.0 * linear, 1e-6 * linear) << "rank " << rank;
  }
}

// Megatron-LM reduces fp32 main gradients with bf16 and the fp16 gradients themselves with
// fp16: memory follows the same gradient type as the traffic.
TEST(ModelFixes, FpSixteenKeepsSixteenBitGradients) {
  const ModelSpec m = load_model("gpt3-175b");
  Plan p;
  p.tp = 8;
  p.pp = 8;
  p.dp = 4;
  p.gbs = 1536;
  Workload w;
  for (Precision prec : {Precision::kBf16, Precision::kFp16}) {
    w.precision = prec;
    const double per_param = prec == Precision::kFp16 ? 2.0 : 4.0;
    EXPECT_EQ(grad_bytes_per_param(p, prec), per_param);
    const StageMemory s = all_stage_memory(m, w, p)[1];
    const double params = params_on_rank(m, p, 1).total();
    EXPECT_NEAR(s.grads_bytes, per_param * params, 1e-6 * params);
  }
}

// A ZeRO-3 step moves its parameter traffic on the data-parallel stream: the trace holds the
// gathers of every forward and the gathers and reduce-scatters of every backward.
TEST(ModelFixes, ZeroThreeTraceHoldsGathersAndReduceScatters) {
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80g", 256);
  const Plan p = testing::megatron_plan(8, 4, 8, 64, /*zero=*/3);
  const Workload w = testing::workload_for(p);
  const des::StepSimResult r = des::simulate_step(m, c, w, p, true, /*record_trace=*/true);
  int gathers = 0, reduces = 0;
  for (const des::TraceEvent& t : r.trace) {
    if (t.stream != des::StreamKind::kDp) continue;
    if (t.name.rfind("ZeRO-3 all-gather + reduce-scatter", 0) == 0)
      ++reduces;
    else if (t.name.rfind("ZeRO-3 all-gather", 0) == 0)
      ++gathers;
  }
  const int tasks = p.pp * p.num_microbatches();  // one forward and one backward per stage
  EXPECT_EQ(gathers, tasks);
  EXPECT_EQ(reduces, tasks);
}

// The cases the issue reported: exposed TP above total TP (the head's collectives were exposed
// but not counted in the total).
TEST(ModelFixes, ExposedTpWithinTotalOnTheReportedPlans) {
  {
    const ModelSpec m = load_model("llama3-70b");
    const Cluster c = load_cluster("dgx-h100", 64);
    const Plan p = testing::megatron_plan(8, 2, 4, 512);
    Workload w = testing::workload_for(p, 8192);
    w.precision = Precision::kFp8;
    const Estimate e = estimate(m, c, w, p);
    EXPECT_LE(e.exposed_comm_s[kTp], e.comm_time_s[kTp]);
  }
  {
    const ModelSpec m = load_model("gpt3-175b");
    const Cluster c = load_cluster("dgx-a100-80g", 256);
    Plan p;
    p.tp = 8;
    p.pp = 16;
    p.dp = 2;
    p.sp = false;
    p.recompute = Recompute::kFull;
    p.gbs = 1536;
    const Estimate e = estimate(m, c, Workload{}, p);
    EXPECT_LE(e.exposed_comm_s[kTp], e.comm_time_s[kTp]);
  }
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// Sequence parallelism: the backward re-gathers each TP block's sequence-sharded input for its
// weight gradient, overlapped with the input-gradient GEMM (Megatron-LM
// LinearWithGradAccumulationAndAsyncCommunication.backward, async_op=True). On GPT-3 TP8 with
// its large GEMMs the re-gathers hide entirely: total minus exposed TP time is exactly the
// re-gathers, two per layer (attention and MLP) and one for the output layer per micro-batch,
// each an all-gather of the [s b, h] activation over the TP group, priced here by the
// collective cost model.
TEST(ModelFixes, SequenceParallelReGathersHideBehindTheInputGradient) {
  const ModelSpec m = load_model("gpt3-175b");
  const Cluster c = load_cluster("dgx-a100-80g", 64);
  const Plan p = testing::megatron_plan(8, 1, 8, 64);
  const Workload w = testing::workload_for(p);
  const Estimate e = estimate(m, c, w, p);
  const GroupPlacement& tp = place_groups(p, c.profile, 64).tp;
  const double activation_bytes = 1.0 * p.mbs * w.seq_len * m.hidden * 2;  // bf16
  const double regather =
      collective_cost(c.profile, CollectiveOp::kAllGather, activation_bytes, tp).time_s;
  const double expect = p.num_microbatches() * (m.layers * 2 + 1) * regather;
  EXPECT_NEAR(e.comm_time_s[kTp] - e.exposed_comm_s[kTp], expect, 1e-9 * expect);
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// Megatron-Core's --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split
// (get_num_layers_to_build, megatron/core/transformer/transformer_block.py:147-202,
// NVIDIA/Megatron-LM@d98e8a6): the embedding and the loss each count as one layer, the total
// divides by pp*vpp, and the first (last) chunk builds one decoder layer fewer. Llama 3.1 405B's
// 126 layers on PP16 x VPP8 (the Megatron-Bridge GB200 recipe): 128 slots, one per chunk, so
// rank 0's first chunk holds only the embedding and the last rank's last chunk only the loss.
TEST(PlanFields, EmbeddingAndLossCountAsPipelineLayers) {
  ModelSpec m = load_model("llama3.1-405b");
  ASSERT_EQ(m.layers, 126);
  Plan p;
  p.tp = 4, p.pp = 16, p.vpp = 8, p.dp = 4, p.schedule = "interleaved";
  Workload w;
  w.global_batch = p.gbs = 1536;
  EXPECT_FALSE(validate_plan(m, p.world(), w, p).empty());  // 126 cannot fill 128 chunks
  p.account_for_embedding = p.account_for_loss = true;
  EXPECT_TRUE(validate_plan(m, p.world(), w, p).empty());
  EXPECT_EQ(layers_on_rank(m, p, 0).total(), 7);  // 0 + 7 x 1
  EXPECT_EQ(layers_on_rank(m, p, 1).total(), 8);
  EXPECT_EQ(layers_on_rank(m, p, 15).total(), 7);  // 7 x 1 + 0
  int sum = 0;
  for (int r = 0; r < p.pp; ++r) sum += layers_on_rank(m, p, r).total();
  EXPECT_EQ(sum, 126);
  // Without interleaving: 126 + 2 = 128 on 16 stages of 8: 7 / 8 x 14 / 7.
  p.vpp = 1, p.schedule = "1f1b";
  EXPECT_TRUE(validate_plan(m, p.world(), w, p).empty());
  EXPECT_EQ(layers_on_rank(m, p, 0).total(), 7);
  EXPECT_EQ(layers_on_rank(m, p, 8).total(), 8);
  EXPECT_EQ(layers_on_rank(m, p, 15).total(), 7);
  // Only the embedding counted: 127 does not divide by 16.
  p.account_for_loss = false;
  EXPECT_FALSE(validate_plan(m, p.world(), w, p).empty());
  // The flags exclude Megatron's first/last stage layer counts (--uneven-pp here).
  p.account_for_loss = true;
  p.uneven_pp = true;
  bool refused = false;
  for (const Violation& v : validate_plan(m, p.world(), w, p)) refused |= v.flag == "--uneven-pp";
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace dtplan

namespace dtplan {
namespace {

// DeepSeek-V3's multi-token-prediction module, priced where Megatron-Core runs it (the loss
// stage; NVIDIA/Megatron-LM @d98e8a6): one more MoE layer there (its last layer is MoE), the
// embedding copy that stage builds for it (gpt_model.py, `pre_process or mtp_process`), its
// projection and norms, a second pass through the output layer, and the FLOPs Megatron's
// training.py counts for it. Expected values from the model's fields and ParamCounts, against
// the same model without the module.
TEST(ModelFixes, MultiTokenPredictionRunsOnTheLossStage) {
  const ModelSpec with = load_model("deepseek-v3");
  ASSERT_EQ(with.mtp_layers, 1);
  ModelSpec without = with;
  without.mtp_layers = 0;
  Plan p;
  p.tp = 1, p.pp = 8, p.ep = 8, p.dp = 32, p.mbs = 1, p.gbs = 1024, p.uneven_pp = true;
  p.recompute = Recompute::kFull;
  Workload w;
  w.seq_len = 4096;
  w.global_batch = p.gbs;
  // Layers: the loss stage runs one more MoE layer; the launch's split counts decoders only.
  for (int r = 0; r < p.pp; ++r) {
    const RankLayers a = layers_on_rank(with, p, r), b = layers_on_rank(without, p, r);
    EXPECT_EQ(a.moe - b.moe, r == p.pp - 1 ? 1 : 0) << r;
    EXPECT_EQ(a.dense, b.dense) << r;
    EXPECT_EQ(decoder_layers_on_rank(with, p, r), b) << r;
  }
  // Parameters at TP1 EP1 (nothing sharded): the loss stage holds the whole module
  // (ParamCounts::mtp) and a copy of the embedding (vocab x hidden) more.
  Plan flat = p;
  flat.ep = 1;
  const ParamsOnRank pa = params_on_rank(with, flat, flat.pp - 1);
  const ParamsOnRank pb = params_on_rank(without, flat, flat.pp - 1);
  EXPECT_DOUBLE_EQ(pa.total() - pb.total(), static_cast<double>(count_params(with).mtp) +
                                                static_cast<double>(with.vocab) * with.hidden);
  EXPECT_DOUBLE_EQ(params_on_rank(with, flat, 0).total(), params_on_rank(without, flat, 0).total());
  // FLOPs per step, Megatron's terms: 6 x tokens x (attention + shared and top-k routed expert
  // GEMMs of one MoE layer + 3h + 2h^2 + h x vocab) + the layer's causal core attention.
  const MoeSpec& e = *with.moe;
  const double h = with.hidden, tokens = static_cast<double>(w.global_batch) * w.seq_len;
  const double layer =
      static_cast<double>(count_params(with).attention_per_layer) +
      3 * h *
          (e.topk * double(e.expert_ffn_hidden) + e.shared_experts * double(e.shared_ffn_hidden));
  const double qk = with.mla->qk_nope_head_dim + with.mla->qk_rope_head_dim;
  const double core = 3.0 * 2.0 * with.heads * w.seq_len * (qk + with.mla->v_head_dim) * 0.5;
  const double want = tokens * (6.0 * (layer + 3 * h + 2 * h * h + h * with.vocab) + core);
  const Cluster c = load_cluster("dgx-h100", p.world());
  const Estimate ea = estimate(with, c, w, p), eb = estimate(without, c, w, p);
  EXPECT_NEAR(ea.model_flops - eb.model_flops, want, want * 1e-9);
  // Time and memory: the loss stage works longer and holds more; the first stage is unchanged.
  EXPECT_GT(ea.step_time_s, eb.step_time_s);
  EXPECT_GT(ea.memory_last.total_bytes(), eb.memory_last.total_bytes());
  EXPECT_DOUBLE_EQ(ea.memory_first.total_bytes(), eb.memory_first.total_bytes());
}

}  // namespace
}  // namespace dtplan
